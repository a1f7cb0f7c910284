#!/usr/bin/env node
// The `keel` command: registers tsx's loader in this process and runs cli/main.ts.
// The command runs the TypeScript sources (no build needed); `import "keel"` loads dist/.
import { register } from "tsx/esm/api";

register();
const { runAsProcess } = await import(new URL("./main.ts", import.meta.url).href);
await runAsProcess();
