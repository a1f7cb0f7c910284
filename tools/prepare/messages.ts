import { truncateUtf8, utf8Length } from "../utf8.ts";
import type { JsonSyntaxError } from "./json-scan.ts";

/** How much of the received text an error message quotes. */
export const RECEIVED_SNIPPET_BYTES = 2000;

/** The first 2000 bytes of `text` (UTF-8, whole characters) with its total size when cut. */
export function receivedSnippet(text: string): string {
  if (text === "") return "(empty)";
  const head = truncateUtf8(text, RECEIVED_SNIPPET_BYTES);
  if (!head.cut) return text;
  return `${head.text}… [first ${head.bytes} of ${utf8Length(text)} bytes]`;
}

/** 1-based line and column (UTF-16 units) of `offset`; linear in `offset`. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf("\n"); i !== -1 && i < offset; i = text.indexOf("\n", i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: offset - lineStart + 1 };
}

/** A compact JSON text of a schema or value, cut at 2000 bytes. Never throws. */
export function compactJson(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return receivedSnippet(text);
}

/** The one layout every preparation error uses: what, where, what was received, how to fix. */
export function composeMessage(parts: {
  headline: string;
  where: string;
  received: string;
  fix: string;
}): string {
  return `${parts.headline}\nWhere: ${parts.where}\nReceived: ${parts.received}\nHow to fix: ${parts.fix}`;
}

/** "line 1, column 7: expected …" for a JSON syntax error. */
export function describeSyntaxError(text: string, error: JsonSyntaxError): string {
  const { line, column } = lineColumn(text, error.offset);
  return `line ${line}, column ${column} (offset ${error.offset}): ${error.reason}`;
}

/** A value JavaScript has and JSON has not, where the parser stopped. */
const NOT_JSON_VALUE = /NaN|-?Infinity|undefined/y;

/** A targeted hint for the common ways models break JSON, or "" if none applies. */
export function syntaxHint(text: string, error: JsonSyntaxError): string {
  const trimmed = text.trimStart();
  if (trimmed.startsWith("```")) return "Send the bare JSON object, without a markdown code fence.";
  if (trimmed.startsWith("<")) return "Send a JSON object, not XML or other markup.";
  if (error.offset >= text.length) {
    return "The text ends before the JSON is complete; nothing was executed. Re-send the complete call.";
  }
  const c = text[error.offset];
  if (c === "'") return "Use double quotes for strings and property names.";
  if (c === "/") return "JSON has no comments; remove them.";
  NOT_JSON_VALUE.lastIndex = error.offset;
  if (NOT_JSON_VALUE.test(text)) {
    return "NaN, Infinity and undefined are not JSON values; use a number or null.";
  }
  if ((c === "}" || c === "]") && text.slice(0, error.offset).trimEnd().endsWith(",")) {
    return "Remove the trailing comma.";
  }
  if (/[A-Za-z_$]/.test(c)) return "Put property names and strings in double quotes.";
  return "";
}
