// The schema of every stored log entry: one zod schema per entry type, checked at compile time to
// be exactly `LogEntry` (session/entries.ts), so the shape the log writes and the shape a store
// reads back cannot drift apart. session/decode.ts runs it on every entry a store loads.
import { z } from "zod";
import type { JsonValue } from "../contracts/messages.ts";
import type { LogEntry } from "./entries.ts";

/** Any JSON value (contracts/messages.ts `JsonValue`): provider metadata, structured results. */
const json: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([
    z.null(),
    z.string(),
    z.number(),
    z.boolean(),
    z.array(json),
    z.record(z.string(), json.optional()),
  ]),
);
const providerMetadata = z.record(z.string(), z.record(z.string(), json.optional())).optional();

const textPart = z.object({ type: z.literal("text"), text: z.string(), providerMetadata });
const imagePart = z.union([
  z.object({ type: z.literal("image"), url: z.string(), mediaType: z.string().optional() }),
  z.object({ type: z.literal("image"), base64: z.string(), mediaType: z.string() }),
]);
const reasoningPart = z.object({
  type: z.literal("reasoning"),
  text: z.string(),
  providerMetadata,
});
const toolCallPart = z.object({
  type: z.literal("tool-call"),
  id: z.string(),
  name: z.string(),
  arguments: z.string(),
  providerMetadata,
});
/** A part of a user message (contracts/messages.ts `UserPart`): text or an image. */
export const userPartSchema = z.union([textPart, imagePart]);
const userPart = userPartSchema;
const assistantPart = z.discriminatedUnion("type", [textPart, reasoningPart, toolCallPart]);
const usage = z.object({
  inputTokens: z.number(),
  outputTokens: z.number(),
  cachedInputTokens: z.number().optional(),
  reasoningTokens: z.number().optional(),
});

/** A neutral message (contracts/messages.ts `Message`): what a checkpoint's projection holds. */
export const messageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content: z.string() }),
  z.object({ role: z.literal("user"), content: z.array(userPart) }),
  z.object({ role: z.literal("assistant"), content: z.array(assistantPart) }),
  z.object({
    role: z.literal("tool"),
    content: z.tuple([
      z.object({
        type: z.literal("tool-result"),
        callId: z.string(),
        name: z.string(),
        content: z.string(),
        isError: z.boolean().optional(),
      }),
    ]),
  }),
]);

const toolResult = z.discriminatedUnion("ok", [
  z.object({
    ok: z.literal(true),
    content: z.string(),
    truncated: z.boolean().optional(),
    continuation: z
      .object({
        tool: z.string(),
        args: z.record(z.string(), z.unknown()),
        path: z.string().optional(),
        sha256: z.string().optional(),
      })
      .optional(),
    structured: json.optional(),
    images: z.array(z.object({ mediaType: z.string(), base64: z.string() })).optional(),
  }),
  z.object({
    ok: z.literal(false),
    code: z.enum([
      "UNKNOWN_TOOL",
      "INVALID_ARGS",
      "TRUNCATED_CALL",
      "EXECUTION_FAILED",
      "CANCELLED",
      "OUTCOME_UNKNOWN",
      "DENIED",
      "PATH_OUTSIDE_WORKSPACE",
      "PARAMETER_MISMATCH",
      "NOT_FOUND",
      "TIMEOUT",
      "NO_RESULT_RECORDED",
    ]),
    message: z.string(),
    retryable: z.boolean(),
  }),
]);

const inboxSource = z.enum(["user", "tool", "job", "system"]);
const inboxLane = z.enum(["interrupt", "next-step", "next-turn"]);
const acceptanceStatus = z.enum(["pending", "passed", "failed", "stale"]);
const checkKind = z.enum(["check", "opinion"]);
const checkEvidence = z.object({
  name: z.string(),
  kind: checkKind,
  passed: z.boolean(),
  output: z.string(),
  startedAt: z.number(),
  durationMs: z.number(),
  artifactVersion: z.string(),
});
const evidence = z.object({
  artifactVersion: z.string().optional(),
  checks: z.array(checkEvidence),
});
const replyType = z.enum(["allow_once", "allow_always", "deny", "deny_with_feedback"]);

/** Who wrote a log: the Keel version and the log schema version (`EntryBase.writer`). */
export const writerSchema = z.object({ keel: z.string(), schema: z.number() });

const base = {
  id: z.string(),
  parentId: z.string().nullable(),
  seq: z.number(),
  at: z.number(),
  encodingProblem: z.string().optional(),
  redacted: z.object({ reason: z.string(), at: z.number() }).optional(),
  writer: writerSchema.optional(),
};
/** One entry type's schema: the base fields, its `type` and its payload. */
const entry = <K extends string, S extends z.ZodRawShape>(type: K, payload: S) =>
  z.object({ ...base, type: z.literal(type), ...payload });

/** A `call_started` entry (a checkpoint's open calls are these). */
export const callStartedSchema = entry("call_started", {
  callId: z.string(),
  name: z.string(),
  args: z.unknown(),
  idempotencyKey: z.string(),
  idempotent: z.boolean(),
});
/** A `compaction` entry (a checkpoint's baseline is one). */
export const compactionSchema = entry("compaction", {
  summary: z.string(),
  firstKeptId: z.string(),
  usage: usage.optional(),
  cost: z.number().optional(),
  usageEstimated: z.literal(true).optional(),
});

/** Every entry type's schema, discriminated on `type`. */
export const logEntrySchema = z.discriminatedUnion("type", [
  entry("user_message", {
    text: z.string(),
    parts: z.array(userPart).optional(),
    turnId: z.string().optional(),
    inboxId: z.string().optional(),
  }),
  entry("turn_start", {
    turnId: z.string(),
    tools: z
      .object({
        version: z.number(),
        tools: z.array(z.string()),
        sources: z.array(z.object({ name: z.string(), version: z.number() })),
      })
      .optional(),
    offered: z.record(z.string(), z.string()).optional(),
  }),
  entry("attempt_start", {
    turnId: z.string(),
    attemptId: z.string(),
    step: z.number(),
    recovery: z
      .object({
        mode: z.enum(["retry", "continue"]),
        from: z.string(),
        prefixChars: z.number().optional(),
        fallback: z.string().optional(),
      })
      .optional(),
  }),
  entry("attempt_end", {
    attemptId: z.string(),
    status: z.enum(["completed", "interrupted", "failed"]),
    partialReasoning: z.array(reasoningPart).optional(),
    partialText: z.string().optional(),
    partialCalls: z.array(toolCallPart).optional(),
    error: z.string().optional(),
  }),
  entry("assistant_message", {
    turnId: z.string(),
    attemptId: z.string(),
    content: z.array(assistantPart),
    finishReason: z.enum(["stop", "tool_calls", "length", "content_filter"]),
    usage: usage.optional(),
    cost: z.number().optional(),
    continuation: z.object({ from: z.string(), prefixChars: z.number() }).optional(),
    usageEstimated: z.literal(true).optional(),
  }),
  callStartedSchema,
  entry("call_result", {
    callId: z.string(),
    name: z.string(),
    outcome: z.enum(["completed", "failed", "cancelled", "unknown", "not_executed"]),
    result: toolResult,
  }),
  entry("permission_decision", {
    turnId: z.string(),
    requestId: z.string(),
    callId: z.string(),
    tool: z.string(),
    decision: z.discriminatedUnion("type", [
      z.object({ type: z.literal("allow") }),
      z.object({ type: z.literal("declined"), reason: z.string() }),
      z.object({ type: z.literal("corrected"), feedback: z.string() }),
    ]),
    source: z.discriminatedUnion("type", [
      z.object({ type: z.literal("policy") }),
      z.object({ type: z.literal("reply"), reply: replyType }),
      z.object({ type: z.literal("spread"), reply: replyType, by: z.string() }),
      z.object({ type: z.literal("turn_ended") }),
      z.object({ type: z.literal("expired") }),
    ]),
    answerId: z.string().optional(),
  }),
  entry("permission_request", {
    turnId: z.string(),
    requestId: z.string(),
    callId: z.string(),
    tool: z.string(),
    args: z.unknown(),
    risk: z.enum(["low", "medium", "high"]),
    deadlineAt: z.number().optional(),
  }),
  entry("turn_continued", {
    turnId: z.string(),
    continuation: z.number(),
    where: z.string(),
  }),
  entry("context_edit", { targetId: z.string(), replacement: z.string().nullable() }),
  compactionSchema,
  entry("settings", { settings: z.record(z.string(), z.unknown()) }),
  entry("inbox", {
    inboxId: z.string(),
    source: inboxSource,
    lane: inboxLane,
    body: z.string(),
    parts: z.array(userPart).optional(),
  }),
  entry("inbox_consumed", { inboxId: z.string() }),
  entry("turn_end", {
    turnId: z.string(),
    status: z.enum(["completed", "cancelled", "failed", "budget_exhausted"]),
    reason: z.string().optional(),
    code: z.enum(["STORE_FAILED", "LEASE_LOST", "CRASH_LOOP"]).optional(),
    budget: z
      .object({
        scope: z.enum(["turn", "prompt", "session", "agent"]),
        kind: z.enum(["steps", "tokens", "inputTokens", "outputTokens", "cost", "time"]),
        limit: z.number(),
        spent: z.number(),
        defaulted: z.boolean(),
      })
      .optional(),
  }),
  entry("turn_aborted", { turnId: z.string(), where: z.string() }),
  entry("leaf", { leafId: z.string().nullable(), reason: z.string() }),
  entry("note", { text: z.string(), audience: z.enum(["model", "log"]).optional() }),
  entry("acceptance_spec", {
    version: z.number(),
    digest: z.string(),
    checks: z.array(
      z.object({ name: z.string(), kind: checkKind, command: z.string().optional() }),
    ),
    files: z.array(z.object({ path: z.string(), sha256: z.string(), content: z.string() })),
  }),
  entry("acceptance", {
    specVersion: z.number(),
    acceptance: acceptanceStatus,
    evidence,
    rounds: z.number(),
    reason: z.enum(["turn", "accept", "handoff"]),
    interrupted: z.boolean().optional(),
  }),
  entry("handoff", {
    record: z.object({
      sessionId: z.string(),
      at: z.number(),
      goal: z.string(),
      progress: z.string(),
      specVersion: z.number(),
      artifactVersion: z.string().optional(),
      acceptance: acceptanceStatus,
      verified: z.array(z.object({ fact: z.string(), evidence: checkEvidence })),
      unverified: z.array(z.string()),
      nextSteps: z.array(z.string()),
    }),
    markdown: z.string(),
  }),
]);

/** Every entry type the schema knows: a stored `type` outside it is not this Keel's. */
export const ENTRY_TYPES: ReadonlySet<string> = new Set(
  logEntrySchema.options.map((o) => o.shape.type.value),
);

/** `T` with every intersection flattened, at every depth, so two spellings of a shape compare equal. */
type Flat<T> = [JsonValue] extends [T]
  ? T // recursive: compared as is (the schema above is declared as exactly JsonValue)
  : T extends readonly unknown[]
    ? { [K in keyof T]: Flat<T[K]> }
    : T extends object
      ? { [K in keyof T]: Flat<T[K]> }
      : T;
/** Whether `A` and `B` are the same type (optional fields and all), not merely assignable. */
type Same<A, B> =
  (<T>() => T extends Flat<A> ? 1 : 2) extends <T>() => T extends Flat<B> ? 1 : 2 ? true : false;
/** Each entry type's name whose schema is not exactly its `LogEntry` member (never: none). */
type Drifted = {
  [K in LogEntry["type"]]: Same<
    Extract<z.infer<typeof logEntrySchema>, { type: K }>,
    Extract<LogEntry, { type: K }>
  > extends true
    ? never
    : K;
}[LogEntry["type"]];
// A compile error here names the entry type whose schema and `LogEntry` member differ.
const noDrift: [Drifted] extends [never] ? true : Drifted = true;
/** @internal The entry types whose schema drifted (never when none), for a probe. */
export type DriftedTypes = Drifted;
void noDrift;
