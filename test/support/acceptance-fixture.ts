import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** A buggy `add` and a test that catches it: the workspace acceptance tests run against. */
export const BUGGY_ADD = "export const add = (a, b) => a - b;\n";
export const FIXED_ADD = "export const add = (a, b) => a + b;\n";
export const ADD_TEST = [
  'import { add } from "./add.mjs";',
  "if (add(2, 2) !== 4) {",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the test file's own template literal
  "  console.error(`add(2, 2) returned ${add(2, 2)}, expected 4`);",
  "  process.exit(1);",
  "}",
  'console.log("add: ok");',
  "",
].join("\n");

/** A fresh workspace (not a git repository) with `add.mjs` (buggy) and `add.test.mjs`. */
export function addWorkspace(): string {
  const ws = mkdtempSync(path.join(tmpdir(), "keel-accept-"));
  mkdirSync(ws, { recursive: true });
  writeFileSync(path.join(ws, "add.mjs"), BUGGY_ADD);
  writeFileSync(path.join(ws, "add.test.mjs"), ADD_TEST);
  return ws;
}

/** A scripted tool call. */
export const call = (id: string, name: string, args: unknown) => ({
  toolCalls: [{ id, name, arguments: JSON.stringify(args) }],
});
