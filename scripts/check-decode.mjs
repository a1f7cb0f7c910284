#!/usr/bin/env node
// Stored data is decoded, never cast (docs/architecture.md, "The layers"; session/decode.ts):
// `npm run lint` fails on any `JSON.parse(…) as T` (or `<T>JSON.parse(…)`) in shipped code. Read
// a stored entry or checkpoint with `decodeEntry`/`decodeCheckpoint`; other JSON, with a schema
// or a check of the fields you use.
// Run: `node scripts/check-decode.mjs [root]`; exits 1 and names each cast.
import { readFileSync, realpathSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { shippedFiles } from "./check-shape.mjs";

/**
 * Casts allowed, each with why the value is known to have the type (none is stored data).
 */
export const ALLOWED = {
  "tools/prepare/split-concatenated.ts":
    "a model's tool-call arguments, not stored data: the text was just scanned as one complete JSON value that starts with `{`, so it parses to an object",
};

/** Whether `node` (parentheses and `!` removed) is a call of `JSON.parse`. */
function isJsonParse(node) {
  let e = node;
  while (ts.isParenthesizedExpression(e) || ts.isNonNullExpression(e)) e = e.expression;
  return (
    ts.isCallExpression(e) &&
    ts.isPropertyAccessExpression(e.expression) &&
    e.expression.name.text === "parse" &&
    ts.isIdentifier(e.expression.expression) &&
    e.expression.expression.text === "JSON"
  );
}

/** The 1-based lines of a source text where the result of `JSON.parse` is cast. */
export function parseCasts(text, fileName = "file.ts") {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const lines = [];
  const visit = (node) => {
    if (
      (ts.isAsExpression(node) || ts.isTypeAssertionExpression(node)) &&
      isJsonParse(node.expression)
    ) {
      lines.push(source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return lines;
}

/** Each cast of `JSON.parse` in the shipped code under `root`, as `file:line`. */
export function casts(root) {
  const found = [];
  for (const file of shippedFiles(root)) {
    const text = readFileSync(path.join(root, file), "utf8");
    if (!text.includes("JSON.parse") || file in ALLOWED) continue;
    for (const line of parseCasts(text, file)) found.push(`${file}:${line}`);
  }
  return found;
}

if (
  process.argv[1] &&
  realpathSync(fileURLToPath(import.meta.url)) === realpathSync(process.argv[1])
) {
  const root = path.resolve(process.argv[2] ?? path.join(path.dirname(process.argv[1]), ".."));
  const found = casts(root);
  for (const c of found)
    console.error(
      `decode: ${c}: JSON.parse(…) cast with \`as\`; decode it (session/decode.ts for stored entries and checkpoints, else a schema or a check of the fields used)`,
    );
  if (found.length > 0) process.exit(1);
  console.log("decode: no JSON.parse(…) cast with `as` in shipped code");
}
