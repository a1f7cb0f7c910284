import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../contracts/chat.ts";
import type { Message } from "../contracts/messages.ts";
import { ModelError } from "../contracts/model.ts";
import {
  type CompactionResult,
  type CompactOptions,
  compactSession,
} from "../session/compaction.ts";
import { SHRINK_STEPS } from "../session/compaction-summary.ts";
import type { LogEntry } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import { summaryText } from "../session/projection.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { openLog } from "./session-fixtures.ts";
import { keptOrphan, wellFormedViolation } from "./session-random-log.ts";
import { compactAppendsUnvalidated } from "./support/mutants/compaction-appends-unvalidated.ts";
import { cutsAtResults } from "./support/mutants/compaction-cuts-at-results.ts";

/**
 * Invariant 10 of docs/architecture.md over random sessions: a runtime-like interpreter writes user messages, steps
 * (assistant messages with 0–3 calls whose results arrive in completion order, some later,
 * interleaved with other work), failed attempts, turn ends (normal: running calls are
 * cancelled; crash: recovery writes `unknown` results, idempotent calls stay running and
 * answer after the turn ended) — and compactions at random points with random summarizers.
 */

type CallPlan = "now" | "later" | "laterIdem" | "notexec" | "never";
type Summarizer = "ok" | "error" | "empty" | "long" | { overflow: number };
type Op =
  | { k: "user"; pad: number }
  | { k: "step"; calls: CallPlan[]; order: number; pad: number }
  | { k: "complete"; pick: number }
  | { k: "failAttempt"; status: "failed" | "interrupted" }
  | { k: "endTurn"; crash: boolean }
  | { k: "note" }
  | { k: "compact"; keep: number; summarizer: Summarizer };

const plan = fc.constantFrom<CallPlan>(
  "now",
  "now",
  "now",
  "later",
  "laterIdem",
  "notexec",
  "never",
);
const summarizer = fc.oneof(
  fc.constantFrom<Summarizer>("ok", "ok", "error", "empty", "long"),
  fc.record({ overflow: fc.integer({ min: 1, max: 5 }) }),
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant("user" as const), pad: fc.nat(120) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      k: fc.constant("step" as const),
      calls: fc.array(plan, { maxLength: 3 }),
      order: fc.nat(),
      pad: fc.nat(120),
    }),
  },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("complete" as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("failAttempt" as const),
      status: fc.constantFrom("failed" as const, "interrupted" as const),
    }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("endTurn" as const), crash: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ k: "note" as const }) },
  {
    weight: 3,
    arbitrary: fc.record({
      k: fc.constant("compact" as const),
      keep: fc.oneof(
        { weight: 3, arbitrary: fc.integer({ min: 0, max: 60 }) },
        { weight: 1, arbitrary: fc.integer({ min: 0, max: 400 }) },
      ),
      summarizer,
    }),
  },
);

type Compact = (log: SessionLog, options: CompactOptions) => Promise<CompactionResult>;
interface Pending {
  callId: string;
  name: string;
  turnId: string;
}

/** The summarize closure for one compaction: ok, overflow k times then ok, other error, invalid. */
function summarizeAs(s: Summarizer, tag: string) {
  let overflows = 0;
  return async (messages: Message[]) => {
    if (typeof s === "object" && overflows++ < s.overflow) {
      throw new ModelError("context_length_exceeded: too many tokens", {
        kind: "http",
        status: 400,
        code: "context_length_exceeded",
      });
    }
    if (s === "error") throw new ModelError("upstream 502", { kind: "http", status: 502 });
    if (s === "empty") return " ";
    if (s === "long") return "L".repeat(JSON.stringify(messages).length * 4 + 400);
    return `SUMMARY ${tag} of ${messages.length}`;
  };
}

/** Plays `ops`, checking invariant 10 of docs/architecture.md after each; returns the first violation or null. */
async function play(ops: readonly Op[], seed: number, compact: Compact): Promise<string | null> {
  const log = await openLog(memoryStore(), "s", seed);
  let n = 0;
  let turn: string | null = null;
  const pending: Pending[] = [];
  const id = (p: string) => `${p}${++n}`;
  const pad = (k: number) => " w".repeat(k);
  const answer = (p: Pending, outcome: "completed" | "cancelled" | "unknown") =>
    log.append({
      type: "call_result",
      callId: p.callId,
      name: p.name,
      outcome,
      result:
        outcome === "completed"
          ? { ok: true, content: `RESULT ${p.callId}${pad(n % 40)}` }
          : {
              ok: false,
              code: outcome === "cancelled" ? "CANCELLED" : "OUTCOME_UNKNOWN",
              message: outcome,
              retryable: false,
            },
    });
  const ensureTurn = () => {
    if (turn) return turn;
    const turnId = id("t");
    log.append({ type: "turn_start", turnId });
    turn = turnId;
    return turnId;
  };
  for (const op of ops) {
    if (op.k === "user")
      log.append({ type: "user_message", text: `USER ${id("u")}${pad(op.pad)}` });
    else if (op.k === "note") log.append({ type: "note", text: id("n"), audience: "model" });
    else if (op.k === "complete" && pending.length > 0) {
      answer(pending.splice(op.pick % pending.length, 1)[0], "completed");
    } else if (op.k === "failAttempt") {
      const attemptId = id("a");
      log.append({ type: "attempt_start", turnId: ensureTurn(), attemptId, step: n });
      log.append({ type: "attempt_end", attemptId, status: op.status, partialText: "PARTIAL" });
    } else if (op.k === "step") {
      const turnId = ensureTurn();
      // the previous batch of this turn settles before the next step
      for (let i = pending.length - 1; i >= 0; i--) {
        if (pending[i].turnId === turnId) answer(pending.splice(i, 1)[0], "completed");
      }
      const attemptId = id("a");
      const calls = op.calls.map((p) => ({
        p,
        callId: id("c"),
        name: p === "laterIdem" ? "idem" : "plain",
      }));
      log.append({ type: "attempt_start", turnId, attemptId, step: n });
      log.append({
        type: "assistant_message",
        turnId,
        attemptId,
        content: [
          { type: "text", text: `ANSWER ${attemptId}${pad(op.pad)}` },
          ...calls.map((c) => ({
            type: "tool-call" as const,
            id: c.callId,
            name: c.name,
            arguments: `{"n":${n}}`,
          })),
        ],
        finishReason: calls.length ? "tool_calls" : "stop",
      });
      log.append({ type: "attempt_end", attemptId, status: "completed" });
      const now: Pending[] = [];
      for (const c of calls) {
        const p = { callId: c.callId, name: c.name, turnId };
        if (c.p === "never") continue;
        if (c.p === "notexec") {
          answer(p, "cancelled");
          continue;
        }
        log.append({
          type: "call_started",
          callId: c.callId,
          name: c.name,
          args: {},
          idempotencyKey: `k-${c.callId}`,
          idempotent: c.p === "laterIdem",
        });
        (c.p === "now" ? now : pending).push(p);
      }
      // results in completion order: a rotation of call order
      for (let i = 0; i < now.length; i++) answer(now[(i + op.order) % now.length], "completed");
    } else if (op.k === "endTurn" && turn) {
      for (let i = pending.length - 1; i >= 0; i--) {
        const p = pending[i];
        if (p.turnId !== turn) continue;
        if (!op.crash) answer(pending.splice(i, 1)[0], "cancelled");
        else if (p.name !== "idem") answer(pending.splice(i, 1)[0], "unknown");
      }
      log.append({ type: "turn_end", turnId: turn, status: op.crash ? "failed" : "completed" });
      if (op.crash) log.append({ type: "turn_aborted", turnId: turn, where: "crash" });
      turn = null;
    } else if (op.k === "compact") {
      const before = {
        messages: structuredClone(log.messages().slice()),
        baseline: log.baseline(),
        size: log.entries().length,
      };
      const r = await compact(log, {
        keepRecentTokens: op.keep,
        summarize: summarizeAs(op.summarizer, id("s")),
      });
      const v = checkCompaction(log, before, r, op.summarizer);
      if (v) return v;
    }
    const v = wellFormedViolation(log.messages()) ?? keptOrphan(log.path(), log.baseline());
    if (v) return `after ${op.k}: ${v}`;
  }
  return null;
}

function checkCompaction(
  log: SessionLog,
  before: { messages: ChatMessage[]; baseline: LogEntry | null; size: number },
  r: CompactionResult,
  s: Summarizer,
): string | null {
  const after = log.messages();
  if (!r.ok) {
    if (log.baseline() !== before.baseline)
      return `failed compaction (${r.code}) replaced the baseline`;
    if (log.entries().length !== before.size) return `failed compaction (${r.code}) appended`;
    if (JSON.stringify(after) !== JSON.stringify(before.messages))
      return `failed compaction (${r.code}) changed the view`;
    if (s === "ok" && r.code !== "NOTHING_TO_COMPACT" && r.code !== "INVALID_SUMMARY")
      return `ok summarizer failed: ${r.code}`;
    if (s === "error" && r.attempts.length > 1) return "a non-overflow error was retried";
  } else {
    if (log.baseline() !== r.entry) return "the new compaction is not the baseline";
    if (after[0]?.content !== summaryText(r.entry))
      return "the view does not start with the summary";
    const kept = after.slice(1);
    if (
      JSON.stringify(kept) !==
      JSON.stringify(before.messages.slice(before.messages.length - kept.length))
    ) {
      return "the kept messages are not the old view's newest messages";
    }
    if (r.tokensAfter > r.tokensBefore) return "the compaction made the context larger";
    if (s === "error" || s === "empty" || s === "long")
      return `summarizer ${JSON.stringify(s)} yet ok`;
  }
  const first = r.attempts[0]?.inputTokens ?? 0;
  for (let i = 1; i < r.attempts.length; i++) {
    if (r.attempts[i - 1].outcome !== "overflow") return "retried after a non-overflow outcome";
    if (r.attempts[i].inputTokens >= r.attempts[i - 1].inputTokens) return "a retry did not shrink";
    // steps may be skipped (same input), never repeated: attempt i is within step i-1 or later
    if (r.attempts[i].inputTokens > SHRINK_STEPS[i - 1] * first)
      return "the input did not shrink to its step";
  }
  if (r.attempts.length > SHRINK_STEPS.length + 1) return "more requests than shrink steps";
  return null;
}

const SEED = 10;
const property = (compact: Compact) =>
  fc.asyncProperty(
    fc.array(opArb, { minLength: 10, maxLength: 60, size: "medium" }),
    fc.nat(),
    async (ops, seed) => {
      const violation = await play(ops, seed, compact);
      if (violation) throw new Error(violation);
    },
  );

describe("compaction on random sessions (invariant 10 of docs/architecture.md)", () => {
  it("after every step the view has no orphan tool message and every call exactly one result; no kept result lost its call; a failed compaction changes nothing", async () => {
    await fc.assert(property(compactSession), { numRuns: 300, seed: SEED });
  });

  it("MUTANT: a cut rule that allows a cut at a tool result is caught", async () => {
    const mutant: Compact = (log, o) => compactSession(log, { ...o, cutPoints: cutsAtResults });
    const out = await fc.check(property(mutant), { numRuns: 300, seed: SEED });
    expect(out.failed).toBe(true);
  });

  it("MUTANT: a compactor that appends before validating the summary is caught", async () => {
    const out = await fc.check(property(compactAppendsUnvalidated), {
      numRuns: 300,
      seed: SEED,
    });
    expect(out.failed).toBe(true);
  });
});
