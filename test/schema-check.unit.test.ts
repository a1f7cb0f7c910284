// The compiled check (session/schema-check.ts) accepts exactly what the zod schema accepts: on a
// valid entry of every type, on random mutations of them, on arbitrary JSON, and on a checkpoint.
// The decoder trusts it on the fast path, so a disagreement here is a decoding bug.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ENTRY_TYPES, logEntrySchema } from "../session/entry-schema.ts";
import { compileCheck } from "../session/schema-check.ts";

const b = (type: string, seq: number) => ({ id: `e${seq}`, parentId: null, seq, at: 1, type });
const meta = { anthropic: { signature: "s", n: 1, deep: [null, true, { x: "y" }] } };
const evidence = {
  name: "tests",
  kind: "check",
  passed: true,
  output: "ok",
  startedAt: 1,
  durationMs: 2,
  artifactVersion: "v1",
};

/** A valid entry of every type, with most optional fields present. */
const SAMPLES: Record<string, unknown>[] = [
  {
    ...b("user_message", 1),
    text: "hi",
    parts: [
      { type: "text", text: "hi" },
      { type: "image", url: "https://x" },
      { type: "image", base64: "AA", mediaType: "image/png" },
    ],
    turnId: "t",
    inboxId: "i",
  },
  {
    ...b("turn_start", 2),
    turnId: "t",
    tools: { version: 1, tools: ["a"], sources: [{ name: "m", version: 2 }] },
    offered: { a: "0123456789abcdef" },
  },
  {
    ...b("attempt_start", 3),
    turnId: "t",
    attemptId: "a",
    step: 1,
    recovery: { mode: "continue", from: "a0", prefixChars: 3, fallback: "x" },
  },
  {
    ...b("attempt_end", 4),
    attemptId: "a",
    status: "interrupted",
    partialReasoning: [{ type: "reasoning", text: "", providerMetadata: meta }],
    partialText: "pa",
    partialCalls: [{ type: "tool-call", id: "c", name: "n", arguments: "{" }],
    error: "cut",
  },
  {
    ...b("assistant_message", 5),
    turnId: "t",
    attemptId: "a",
    content: [
      { type: "reasoning", text: "r", providerMetadata: meta },
      { type: "text", text: "x" },
      { type: "tool-call", id: "c", name: "n", arguments: "{}" },
    ],
    finishReason: "tool_calls",
    usage: { inputTokens: 1, outputTokens: 2, cachedInputTokens: 0, reasoningTokens: 1 },
    cost: 0.5,
    continuation: { from: "a0", prefixChars: 2 },
    writer: { keel: "0.1.0", schema: 3 },
  },
  {
    ...b("call_started", 6),
    callId: "c",
    name: "n",
    args: { deep: [1, { x: null }] },
    idempotencyKey: "k",
    idempotent: true,
  },
  {
    ...b("call_result", 7),
    callId: "c",
    name: "n",
    outcome: "completed",
    result: {
      ok: true,
      content: "x",
      truncated: true,
      continuation: { tool: "read", args: { a: 1 }, path: "/p", sha256: "h" },
      structured: { a: [1] },
      images: [{ mediaType: "image/png", base64: "AA" }],
    },
  },
  {
    ...b("call_result", 8),
    callId: "c",
    name: "n",
    outcome: "failed",
    result: { ok: false, code: "DENIED", message: "no", retryable: false },
  },
  {
    ...b("permission_decision", 9),
    turnId: "t",
    requestId: "r",
    callId: "c",
    tool: "n",
    decision: { type: "corrected", feedback: "f" },
    source: { type: "spread", reply: "deny", by: "r0" },
    answerId: "answer_1",
  },
  {
    ...b("permission_request", 9),
    turnId: "t",
    requestId: "r",
    callId: "c",
    tool: "n",
    args: { path: "a" },
    risk: "high",
    deadlineAt: 5,
  },
  { ...b("turn_continued", 9), turnId: "t", continuation: 1, where: "executing" },
  { ...b("context_edit", 10), targetId: "e1", replacement: null },
  { ...b("compaction", 11), summary: "s", firstKeptId: "e2" },
  { ...b("settings", 12), settings: { model: "m", n: 1 } },
  {
    ...b("inbox", 13),
    inboxId: "i",
    source: "user",
    lane: "next-turn",
    body: "b",
    parts: [{ type: "text", text: "b" }],
  },
  { ...b("inbox_consumed", 14), inboxId: "i" },
  {
    ...b("turn_end", 15),
    turnId: "t",
    status: "budget_exhausted",
    reason: "r",
    code: "STORE_FAILED",
    budget: { scope: "turn", kind: "steps", limit: 1, spent: 1, defaulted: true },
  },
  { ...b("turn_aborted", 16), turnId: "t", where: "sampling" },
  {
    ...b("leaf", 17),
    leafId: null,
    reason: "rollback",
    encodingProblem: "x",
    redacted: { reason: "r", at: 2 },
  },
  { ...b("note", 18), text: "n", audience: "model" },
  {
    ...b("acceptance_spec", 19),
    version: 1,
    digest: "d",
    checks: [{ name: "c", kind: "check", command: "npm test" }],
    files: [{ path: "p", sha256: "h", content: "AA" }],
  },
  {
    ...b("acceptance", 20),
    specVersion: 1,
    acceptance: "passed",
    evidence: { artifactVersion: "v1", checks: [evidence] },
    rounds: 1,
    reason: "turn",
    interrupted: false,
  },
  {
    ...b("handoff", 21),
    record: {
      sessionId: "s",
      at: 1,
      goal: "g",
      progress: "p",
      specVersion: 1,
      artifactVersion: "v",
      acceptance: "stale",
      verified: [{ fact: "f", evidence }],
      unverified: ["u"],
      nextSteps: ["n"],
    },
    markdown: "# m",
  },
];

const check = compileCheck(logEntrySchema);
const zodAccepts = (v: unknown) => logEntrySchema.safeParse(v).success;

/** Every path to a value inside `v` (object keys and array indexes). */
function paths(v: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (typeof v !== "object" || v === null) return [prefix];
  const keys = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v);
  return [prefix, ...keys.flatMap((k) => paths((v as Record<string, unknown>)[k], [...prefix, k]))];
}

/** `v` with the value at `path` replaced (`undefined`: the key deleted). */
function mutate(v: unknown, path: (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value;
  const copy = structuredClone(v) as Record<string | number, unknown>;
  let at = copy;
  for (const k of path.slice(0, -1)) at = at[k] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (value === undefined && !Array.isArray(at)) delete at[last];
  else at[last] = value;
  return copy;
}

describe("the compiled check of the entry schema", () => {
  it("has a valid sample of every entry type, and accepts each as zod does", () => {
    expect(new Set(SAMPLES.map((s) => s.type))).toEqual(ENTRY_TYPES);
    for (const s of SAMPLES) {
      expect(zodAccepts(s), String(s.type)).toBe(true);
      expect(check(s), String(s.type)).toBe(true);
    }
  });

  it("agrees with zod on random mutations of valid entries (a field deleted, retyped, or replaced)", () => {
    const replacement = fc.oneof(
      fc.constant(undefined),
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom("text", "tool-call", "image", "reasoning", "user", 0, true, null, [], {}),
    );
    fc.assert(
      fc.property(fc.constantFrom(...SAMPLES), fc.nat(), replacement, (sample, pick, value) => {
        const all = paths(sample);
        const mutated = mutate(sample, all[pick % all.length], value);
        expect(check(mutated)).toBe(zodAccepts(mutated));
      }),
      { numRuns: 3000 },
    );
  });

  it("agrees with zod on arbitrary JSON, and on entries with a field of another type's", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(check(v)).toBe(zodAccepts(v));
      }),
      { numRuns: 500 },
    );
    for (const s of SAMPLES) {
      for (const other of SAMPLES) {
        const mixed = { ...s, type: other.type };
        expect(check(mixed)).toBe(zodAccepts(mixed));
      }
    }
  });

  it("refuses to compile a schema whose rules it would not check", () => {
    expect(() => compileCheck(z.string().min(1))).toThrow(/refinements/);
    expect(() => compileCheck(z.date())).toThrow(/"date" is not supported/);
    expect(() => compileCheck(z.object({}).catchall(z.string()))).toThrow(/catchall/);
  });
});
