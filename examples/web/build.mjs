#!/usr/bin/env node
// Builds the example chat page into examples/web/dist/ (index.html and one bundle, app.js) with
// esbuild, Keel's own build tool. Run: `node examples/web/build.mjs`; then
// `keel serve --http 8787 --static examples/web/dist` and open the printed page URL.
import { copyFileSync, mkdirSync } from "node:fs";
import { build } from "esbuild";

const here = new URL(".", import.meta.url);
const out = new URL("dist/", here);
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [new URL("app.ts", here).pathname],
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  minify: true,
  sourcemap: true,
  define: { "process.env.NODE_ENV": '"production"' },
  outfile: new URL("app.js", out).pathname,
  logLevel: "warning",
});
copyFileSync(new URL("index.html", here), new URL("index.html", out));
console.log(`built ${out.pathname}`);
