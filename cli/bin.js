#!/usr/bin/env node
// The `keel` command: registers tsx's loader in this process and runs cli/main.ts.
// No build step: the TypeScript sources are the package.
import { register } from "tsx/esm/api";

register();
const { runAsProcess } = await import(new URL("./main.ts", import.meta.url).href);
await runAsProcess();
