import type { AcceptanceStatus, CheckKind, Evidence } from "../contracts/acceptance.ts";
import type { BudgetStop } from "../contracts/budget.ts";
import type {
  AssistantPart,
  ReasoningPart,
  ToolCallPart,
  Usage,
  UserPart,
} from "../contracts/messages.ts";
import type { FinishReason } from "../contracts/model.ts";
import type { DecisionSource, PermissionDecision, Risk } from "../contracts/permission.ts";
import type {
  AttemptStatus,
  CallOutcome,
  InboxLane,
  InboxSource,
  TurnFailureCode,
  TurnStatus,
} from "../contracts/status.ts";
import type { ToolResult } from "../contracts/tool-result.ts";

/**
 * The version of the entries' shape (log schema). 3: assistant messages are neutral
 * `content` parts (reasoning with provider metadata, `tool-call` parts), attempt ends keep
 * `ToolCallPart`s, user messages may carry image `parts`; 2 stored OpenAI Chat tool calls
 * (`toolCalls: [{ id, type: "function", function: { name, arguments } }]` and `text`).
 * `session/upgrade-entry.ts` brings older entries to this shape.
 */
export const LOG_SCHEMA_VERSION = 3;

/**
 * How an attempt follows a failed one of the same response (docs/providers.md). `continue`: the
 * request ended with the `prefixChars` characters of partial text received so far as an
 * assistant message, and the answer continues it. `retry`: the same request again; `fallback`
 * says why a Continue was not possible (the model cannot continue a partial message, or the
 * partial output holds a tool call), so the partial text was dropped.
 */
export interface AttemptRecovery {
  mode: "retry" | "continue";
  /** The failed attempt this one follows. */
  from: string;
  prefixChars?: number;
  fallback?: string;
}

/** Fields every log entry has. `parentId` links the branch; `seq` orders the whole log. */
export interface EntryBase {
  id: string;
  parentId: string | null;
  seq: number;
  /** Clock milliseconds at append. */
  at: number;
  /**
   * Set when part of the entry could not be encoded as JSON (a `BigInt`, nesting past the
   * limit, a cycle): what was wrong and where. The stored entry holds an encodable copy.
   */
  encodingProblem?: string;
  /**
   * Set when the entry's content was redacted (`session/redaction.ts`): its content fields hold
   * `[redacted: <reason>]` instead; why, and when (clock ms).
   */
  redacted?: { reason: string; at: number };
  /**
   * Who wrote the log from this entry on: set on the first entry a Keel writes to a session
   * whose last recorded writer was another Keel version or log schema (its first entry
   * included). An older Keel refuses a log a newer schema wrote (session/decode.ts).
   */
  writer?: EntryWriter;
}

/** A Keel version and the log schema version it writes. */
export interface EntryWriter {
  /** Keel's package version (contracts/version.ts `KEEL_VERSION`). */
  keel: string;
  /** Its `LOG_SCHEMA_VERSION`. */
  schema: number;
}

/** The payload of each entry type, keyed by `type`. */
export interface EntryPayloads {
  /**
   * `text`: the message's text parts joined (what edits and summaries read); `parts` only when
   * the user sent more than text (an image), in order, text parts included.
   */
  user_message: { text: string; parts?: UserPart[]; turnId?: string; inboxId?: string };
  turn_start: {
    turnId: string;
    /**
     * The tools the turn was offered, when its session has a tool set (`ToolSet.snapshot()`):
     * names, the set's version and each source's (an MCP server's list) version.
     */
    tools?: { version: number; tools: string[]; sources: { name: string; version: number }[] };
    /**
     * Each tool the turn offered, by name: a digest of its description and parameters
     * (actors/tool-digests.ts), so a replay sees a tool that changed. Absent in older logs.
     */
    offered?: Record<string, string>;
  };
  attempt_start: {
    turnId: string;
    attemptId: string;
    step: number;
    /** Present when this attempt follows a failed one of the same response. */
    recovery?: AttemptRecovery;
  };
  /** An attempt's end. Interrupted/failed attempts keep their partial output here, never in the projection. */
  attempt_end: {
    attemptId: string;
    status: AttemptStatus;
    partialReasoning?: ReasoningPart[];
    partialText?: string;
    partialCalls?: ToolCallPart[];
    error?: string;
  };
  /**
   * The committed response as neutral parts (contracts/messages.ts), reasoning and provider
   * metadata exactly as streamed: the next request sends them back unchanged.
   */
  assistant_message: {
    turnId: string;
    attemptId: string;
    content: AssistantPart[];
    finishReason: FinishReason;
    /** What the response is charged: the provider's usage, or Keel's estimate (`usageEstimated`). */
    usage?: Usage;
    /** Set when `usage` is Keel's estimate: the provider reported none, or none plausible. */
    usageEstimated?: true;
    /** The response's cost from the embedder's price table (absent without prices). */
    cost?: number;
    /**
     * Set when this attempt continued a cut answer (Continue): the first `prefixChars`
     * characters of its text (`textOf(content)`) were received by failed attempt(s), the last
     * of which was `from`, and sent back as the partial assistant message this attempt
     * continued. The only way a failed attempt's output reaches the projection (invariant 9
     * of docs/architecture.md).
     */
    continuation?: { from: string; prefixChars: number };
  };
  /** Written, and made durable, before the tool's `execute` is called (write-ahead). */
  call_started: {
    callId: string;
    name: string;
    args: unknown;
    idempotencyKey: string;
    idempotent: boolean;
  };
  call_result: { callId: string; name: string; outcome: CallOutcome; result: ToolResult };
  /**
   * How a permission request was decided and by what (`source`: the policy, its own reply, a
   * reply to another pending request that reached it, the turn's end). Log-only: projected
   * nowhere (the call's result says what the model needs); the inspector replays it.
   */
  permission_decision: {
    turnId: string;
    requestId: string;
    callId: string;
    tool: string;
    decision: PermissionDecision;
    source: DecisionSource;
    /**
     * The id of the answer that decided it, when another process posted it through the store
     * (`session.replyPermission` on a follower, `keel approve`): that process reads it back to
     * know whether its answer was the first.
     */
    answerId?: string;
  };
  /**
   * A permission request asked of a person, written (and made durable) before anyone is asked:
   * with no `permission_decision` of the same `requestId` after it, it is pending, in any process
   * and after a restart (session/permission-log.ts). `deadlineAt` (clock ms): at it, the request
   * is decided as denied with feedback that no one answered in time.
   */
  permission_request: {
    turnId: string;
    requestId: string;
    callId: string;
    tool: string;
    args: unknown;
    risk: Risk;
    deadlineAt?: number;
  };
  /**
   * A turn cut by a crash is continued by the process that recovered it (`recovery: "continue"`):
   * the `continuation`-th time. Counted to close a crash loop (docs/crashes.md). Log-only.
   */
  turn_continued: { turnId: string; continuation: number; where: string };
  context_edit: { targetId: string; replacement: string | null };
  /**
   * `usage`, `cost`, `usageEstimated`: what the summary requests of this compaction were
   * charged (every request counts toward the budgets; absent before this was recorded).
   */
  compaction: {
    summary: string;
    firstKeptId: string;
    usage?: Usage;
    cost?: number;
    usageEstimated?: true;
  };
  settings: { settings: Record<string, unknown> };
  /** `parts`: as on `user_message`, only when the input had more than text. */
  inbox: {
    inboxId: string;
    source: InboxSource;
    lane: InboxLane;
    body: string;
    parts?: UserPart[];
  };
  inbox_consumed: { inboxId: string };
  /**
   * A turn's end. A turn has one, except when the store refused the write of its end: then a
   * second `turn_end` (failed, `code` STORE_FAILED or LEASE_LOST) follows it once the store takes
   * writes again, saying what the turn's caller was told. The LAST `turn_end` of a turn is its
   * end (`session/turn-result.ts`).
   */
  turn_end: {
    turnId: string;
    status: TurnStatus;
    reason?: string;
    code?: TurnFailureCode;
    /** With `budget_exhausted`: which budget ran out (scope, kind, cap, spent, defaulted). */
    budget?: BudgetStop;
  };
  /** Where a cut turn stopped; the next turn's context carries it as a note to the model. */
  turn_aborted: { turnId: string; where: string };
  /** The active leaf moved (fork, rollback, switch). */
  leaf: { leafId: string | null; reason: string };
  /**
   * A remark in the log. `audience: "model"` (added) makes the projection show it to the model
   * as a user-role note (e.g. "the work tree did not roll back"); the default is log-only.
   */
  note: { text: string; audience?: "model" | "log" };
  /**
   * A version of the frozen acceptance spec: its checks and the content of every file it
   * freezes (base64, so the original can be restored). Written when a session first runs with a
   * spec different from the last one in its log, and by `session.setAcceptanceSpec()`.
   */
  acceptance_spec: {
    version: number;
    digest: string;
    checks: { name: string; kind: CheckKind; command?: string }[];
    files: { path: string; sha256: string; content: string }[];
  };
  /**
   * A round of acceptance checks ended (or a loop of them): the status the evidence supports and
   * the evidence, bound to artifact versions. Separate from `turn_end`: a turn's run status and
   * the task's acceptance are never inferred from each other.
   */
  acceptance: {
    specVersion: number;
    acceptance: AcceptanceStatus;
    evidence: Evidence;
    /** Follow-up rounds the loop sent. */
    rounds: number;
    reason: "turn" | "accept" | "handoff";
    /** The checks were interrupted: an interrupted check left no evidence. */
    interrupted?: boolean;
  };
  /** A handoff record (`session.handoff()`) and its Markdown. */
  handoff: { record: HandoffRecord; markdown: string };
}

/** What a session hands to the next: verified facts (with evidence) apart from assumptions. */
export interface HandoffRecord {
  sessionId: string;
  /** Clock ms when it was written. */
  at: number;
  goal: string;
  progress: string;
  specVersion: number;
  /** The artifact version the record describes (absent when none was read). */
  artifactVersion?: string;
  acceptance: AcceptanceStatus;
  /** Checks that passed against `artifactVersion`, each with its evidence. */
  verified: { fact: string; evidence: Evidence["checks"][number] }[];
  /** What is believed but not shown by a passing check (failed, stale, pending, opinions, the embedder's). */
  unverified: string[];
  nextSteps: string[];
}

/** The `type` of every log entry. */
export type EntryType = keyof EntryPayloads;

/** One append-only log entry: a discriminated union on `type`. */
export type LogEntry = {
  [K in EntryType]: EntryBase & { type: K } & EntryPayloads[K];
}[EntryType];

/** The log entry of one type, e.g. `EntryOf<"call_result">`. */
export type EntryOf<K extends EntryType> = Extract<LogEntry, { type: K }>;

/** What callers pass to `append`: the log fills in id, parentId, seq and at. */
export type EntryInput = {
  [K in EntryType]: { type: K } & EntryPayloads[K];
}[EntryType];
