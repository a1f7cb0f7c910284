#!/usr/bin/env node
// The `keel` command. Installed from the package, it runs the compiled CLI (dist/cli.js): no
// TypeScript loader at run time. In a clone of the repository (a .git beside cli/, and tsx
// installed as a devDependency) it runs the TypeScript sources through tsx, so an edit applies
// without a build; KEEL_CLI=dist runs the compiled one there too.
import { existsSync } from "node:fs";

const root = new URL("../", import.meta.url);
const clone =
  process.env.KEEL_CLI !== "dist" &&
  existsSync(new URL(".git", root)) &&
  existsSync(new URL("cli/main.ts", root));

/** tsx's loader, or undefined when it is not installed (a clone without its devDependencies). */
async function tsx() {
  try {
    return await import("tsx/esm/api");
  } catch (error) {
    if (error?.code === "ERR_MODULE_NOT_FOUND") return undefined;
    throw error;
  }
}

let cli;
const loader = clone ? await tsx() : undefined;
if (loader) {
  loader.register();
  cli = await import(new URL("cli/main.ts", root).href);
}
if (!cli) {
  const compiled = new URL("dist/cli.js", root);
  if (!existsSync(compiled)) {
    process.stderr.write(
      "keel: dist/cli.js is missing: build it with `npm run build` (npm ci builds it too)\n",
    );
    process.exit(70);
  }
  cli = await import(compiled.href);
}
await cli.runAsProcess();
