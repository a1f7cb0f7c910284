import { jsonProblem, MAX_ARGUMENTS_CHARS, MAX_JSON_DEPTH } from "../contracts/json-limits.ts";
import { notExecuted } from "../contracts/tool-result.ts";
import type { Tool } from "./define-tool.ts";
import {
  compactJson,
  composeMessage,
  describeSyntaxError,
  receivedSnippet,
  syntaxHint,
} from "./prepare/messages.ts";
import { BOM_WARNING, type ReadArguments, readArguments } from "./prepare/read-arguments.ts";
import { remapKeys } from "./prepare/remap-keys.ts";
import { repairFields } from "./prepare/repair-fields.ts";
import { MAX_CONCATENATED_OBJECTS } from "./prepare/split-concatenated.ts";
import { type ArgIssue, validateArgs } from "./prepare/validate-args.ts";
import type { Registry } from "./registry.ts";
import type { PreparedCall, PrepareOutcome, RawToolCall } from "./types.ts";

/**
 * Turns a raw model tool call into a validated call or an error result for the model.
 * Order: resolve the tool name (exact, alias, case/`-`/`_` variant), then the arguments text:
 * BOM dropped; empty → `{}`; strict parse; `{..}{..}` → the first complete object that passes
 * the schema runs, and the repair says which others did not (quoting them, so the model can
 * send each as its own call); double-encoded JSON unwrapped; non-object → error naming the
 * expected shape; unparseable → `{ raw }` is validated only to name the missing fields, and
 * the call is always rejected; misspelled / differently-cased parameter names remapped when
 * unambiguous; zod validation, and when it fails, fields repaired where the schema says
 * (a JSON string where an array or object is expected, one object where an array is) and
 * validated again. Every repair that changed how the model's input was read is listed in
 * `call.repairs` (and `call.warnings`), for the call's result to state. Repair never completes
 * truncated text: no strict non-empty prefix of a valid JSON object is accepted. Errors
 * (`UNKNOWN_TOOL`, `INVALID_ARGS`) say where, what was received (first 2000 bytes) and how to
 * fix. Linear in the arguments length. Pure apart from calling the tool's `resourceKey`; never
 * throws, for any input.
 */
export function prepareCall(call: RawToolCall, registry: Registry): PrepareOutcome {
  const id = safeString(call?.id);
  const name = safeString(call?.name);
  const text = safeString(call?.argumentsText);
  try {
    return prepare(id, name, text, registry);
  } catch (err) {
    const detail = err instanceof Error ? err.message : safeString(err);
    return failure(
      id,
      name,
      text,
      "INVALID_ARGS",
      composeMessage({
        headline: `tool call "${clip(name)}" could not be prepared: ${detail}`,
        where: "argument preparation (an internal error, not your input)",
        received: receivedSnippet(text),
        fix: "Re-send the call; if it fails again, try different arguments.",
      }),
    );
  }
}

function prepare(id: string, name: string, text: string, registry: Registry): PrepareOutcome {
  const resolved = registry.resolve(name);
  if (!resolved.ok) {
    const names = registry.names();
    const available =
      names.length > 0
        ? `Call one of the available tools: ${names.join(", ")}.`
        : "No tools are available; answer without calling a tool.";
    return failure(
      id,
      name,
      text,
      "UNKNOWN_TOOL",
      composeMessage({
        headline: `unknown tool "${clip(name)}".`,
        where: "the tool name",
        received: `name "${clip(name)}" with arguments ${receivedSnippet(text)}`,
        fix: resolved.closest ? `${available} Did you mean "${resolved.closest}"?` : available,
      }),
    );
  }
  const tool = resolved.tool;
  const warnings: string[] = [];
  const repairs: string[] = [];
  if (resolved.via !== "exact")
    repairs.push(`tool name "${clip(name)}" resolved to "${tool.name}"`);
  if (text.length > MAX_ARGUMENTS_CHARS) {
    return failure(
      id,
      name,
      text,
      "INVALID_ARGS",
      composeMessage({
        headline: `the arguments are ${text.length} characters long, over the limit of ${MAX_ARGUMENTS_CHARS}.`,
        where: "the whole arguments text",
        received: receivedSnippet(text),
        fix: "Send less per call: split the work into several calls, or write large content in parts.",
      }),
    );
  }
  const read = readArguments(text);
  for (const w of read.warnings) (w === BOM_WARNING ? warnings : repairs).push(w);
  if (read.kind !== "objects")
    return failure(id, name, text, "INVALID_ARGS", unreadableMessage(tool, text, read));
  if (read.candidates.length > MAX_CONCATENATED_OBJECTS) {
    return failure(
      id,
      name,
      text,
      "INVALID_ARGS",
      composeMessage({
        headline: `the arguments are more than ${MAX_CONCATENATED_OBJECTS} concatenated JSON objects; none was tried.`,
        where: "the whole arguments text",
        received: receivedSnippet(text),
        fix: `Send one JSON object ${expectedShape(tool)}; for several calls, send each as its own tool call.`,
      }),
    );
  }
  for (const candidate of read.candidates) {
    const problem = jsonProblem(candidate, "arguments", MAX_JSON_DEPTH);
    if (problem === undefined) continue;
    return failure(
      id,
      name,
      text,
      "INVALID_ARGS",
      composeMessage({
        headline: `the arguments nest too deeply to be accepted (the limit is ${MAX_JSON_DEPTH} levels of objects and arrays).`,
        where: problem,
        received: receivedSnippet(text),
        fix: `Flatten the arguments to at most ${MAX_JSON_DEPTH} levels of objects and arrays.`,
      }),
    );
  }

  const failures: { issues: ArgIssue[]; unknown: string[] }[] = [];
  for (const [index, candidate] of read.candidates.entries()) {
    const remap = remapKeys(candidate, tool.parameters);
    const checked = validateRepairing(tool, remap.value);
    if (!checked.ok) {
      failures.push({ issues: checked.issues, unknown: remap.unknown });
      continue;
    }
    if (read.candidates.length > 1) repairs.push(concatenationNote(read.candidates, index));
    if (remap.remapped.length > 0) repairs.push(`renamed parameters: ${remap.remapped.join(", ")}`);
    if (remap.unknown.length > 0)
      repairs.push(
        `ignored unknown parameters: ${remap.unknown.map((k) => `"${clip(k)}"`).join(", ")}`,
      );
    repairs.push(...checked.repairs);
    return {
      ok: true,
      call: preparedCall(id, name, text, tool, checked.data, [...repairs, ...warnings], repairs),
    };
  }
  // No candidate passed: the first one's problems are the ones to report.
  const [first] = failures;
  return failure(
    id,
    name,
    text,
    "INVALID_ARGS",
    invalidMessage(tool, text, first.issues, first.unknown, read.candidates.length),
  );
}

function preparedCall(
  id: string,
  requestedName: string,
  text: string,
  tool: Tool,
  args: unknown,
  warnings: string[],
  repairs: string[],
): PreparedCall {
  let traits = tool.resolvedTraits;
  let resourceKey: string | undefined;
  try {
    const key = tool.traits?.resourceKey?.(args);
    resourceKey = typeof key === "string" ? key : undefined;
  } catch (err) {
    traits = { ...traits, concurrencySafe: false };
    warnings.push(
      `resourceKey threw (${err instanceof Error ? err.message : safeString(err)}); the call runs alone`,
    );
  }
  return {
    id,
    name: tool.name,
    requestedName,
    args,
    argumentsText: text,
    tool,
    traits,
    resourceKey,
    warnings,
    repairs,
  };
}

/**
 * Zod validation; when it fails, the fields the schema says have the wrong shape are repaired
 * (a JSON string for an array or object, one object for an array) and validated again. The
 * original problems are reported when the repair does not make the arguments pass.
 */
function validateRepairing(
  tool: Tool,
  value: Record<string, unknown>,
): { ok: true; data: unknown; repairs: string[] } | { ok: false; issues: ArgIssue[] } {
  const result = validateArgs(tool.parameters, value);
  if (result.ok) return { ok: true, data: result.data, repairs: [] };
  const fixed = repairFields(tool.parameters, value);
  if (!fixed || jsonProblem(fixed.value, "arguments", MAX_JSON_DEPTH) !== undefined) return result;
  const again = validateArgs(tool.parameters, fixed.value);
  return again.ok ? { ok: true, data: again.data, repairs: fixed.repairs } : result;
}

/**
 * What became of each of several concatenated objects: the one used, and the others, which
 * did not run (an identical copy is said to be one; a different object is quoted, so the
 * model can send it as its own call).
 */
function concatenationNote(candidates: Record<string, unknown>[], used: number): string {
  const texts = candidates.map((c) => JSON.stringify(c));
  const copies: number[] = [];
  const others: string[] = [];
  texts.forEach((t, i) => {
    if (i === used) return;
    if (t === texts[used]) copies.push(i + 1);
    else others.push(`object ${i + 1} ${clip(t, 120)}`);
  });
  const parts = [
    `received ${candidates.length} concatenated JSON objects; used object ${used + 1}, the first that passes the schema`,
  ];
  if (copies.length > 0) {
    parts.push(
      `${plural(copies, "object")} ${copies.join(", ")} ${copies.length === 1 ? "was an identical copy" : "were identical copies"} and did not run again`,
    );
  }
  if (others.length > 0) {
    parts.push(
      `${others.join(", ")} did NOT run: send ${others.length === 1 ? "it" : "each"} as its own tool call if you meant it`,
    );
  }
  return parts.join("; ");
}

function plural(items: readonly unknown[], word: string): string {
  return items.length === 1 ? word : `${word}s`;
}

function unreadableMessage(
  tool: Tool,
  text: string,
  read: Exclude<ReadArguments, { kind: "objects" }>,
): string {
  if (read.kind === "not-object") {
    return composeMessage({
      headline: `invalid arguments for tool "${tool.name}": expected a JSON object but received ${read.received}.`,
      where: "(root) of the arguments",
      received: receivedSnippet(text),
      fix: `Send one JSON object (not ${read.received}) ${expectedShape(tool)}`,
    });
  }
  const missing = validateArgs(tool.parameters, { raw: read.text });
  const required = missing.ok
    ? ""
    : ` Fields missing or wrong once read as { raw }: ${missing.issues.map((i) => `${i.path} (${i.message})`).join("; ")}.`;
  const what = read.inner
    ? "the arguments are a JSON string whose content is not valid JSON"
    : "the arguments are not valid JSON";
  const hint = syntaxHint(read.text, read.error);
  return composeMessage({
    headline: `invalid arguments for tool "${tool.name}": ${what}.`,
    where: `${read.inner ? "inside the string, " : ""}${describeSyntaxError(read.text, read.error)}`,
    received: receivedSnippet(text),
    fix: `${hint ? `${hint} ` : ""}Send one complete JSON object ${expectedShape(tool)}${required}`,
  });
}

function invalidMessage(
  tool: Tool,
  text: string,
  issues: ArgIssue[],
  unknown: string[],
  candidates: number,
): string {
  const where = issues.map((i) => `at "${i.path}": ${i.message}`).join("; ");
  const declared = Object.keys(
    (tool.jsonSchema.properties as Record<string, unknown> | undefined) ?? {},
  );
  const unknownNote =
    unknown.length > 0
      ? ` Unknown parameters ${unknown.map((k) => `"${clip(k)}"`).join(", ")}; the declared ones are: ${declared.join(", ") || "(none)"}.`
      : "";
  const concatNote =
    candidates > 1
      ? ` You sent ${candidates} concatenated JSON objects and none passes; send exactly one.`
      : "";
  return composeMessage({
    headline: `invalid arguments for tool "${tool.name}": ${issues.length} problem${issues.length === 1 ? "" : "s"}.`,
    where,
    received: receivedSnippet(text),
    fix: `Send one JSON object ${expectedShape(tool)}${unknownNote}${concatNote}`,
  });
}

function expectedShape(tool: Tool): string {
  const example = tool.examples?.[0];
  return `matching this JSON Schema: ${compactJson(tool.jsonSchema)}${example ? ` Example: ${compactJson(example.args)}` : ""}`;
}

function failure(
  id: string,
  name: string,
  text: string,
  code: "UNKNOWN_TOOL" | "INVALID_ARGS",
  message: string,
): PrepareOutcome {
  return {
    ok: false,
    id,
    name,
    argumentsText: text,
    error: notExecuted(code, message),
  };
}

function clip(s: string, max = 200): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** `value` as text: "" for null or undefined, or when it cannot be turned into a string. */
function safeString(value: unknown): string {
  try {
    return value == null ? "" : String(value);
  } catch {
    return "";
  }
}
