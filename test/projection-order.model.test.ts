import { describe, expect, it } from "vitest";
import { seededIds } from "../actors/ids.ts";
import { systemClock } from "../contracts/clock.ts";
import type { Message } from "../contracts/messages.ts";
import type { EntryInput, LogEntry } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import { recoverSession } from "../session/recovery.ts";
import { memoryStore } from "../session/stores/memory-store.ts";

// Invariant 4 of docs/architecture.md, where it holds at runtime: results are written to the log as they settle (in
// completion order, durable at once), and the model's view puts them in CALL order, one each.
// That view is the projection (session/projection.ts): an assistant message reserves a slot per
// call in its call order, and each result fills its call's slot. The batch chart no longer
// orders anything (it reports results in the order they settled).
//
// Bounded exhaustive search: four calls of one message; every order their results arrive in,
// calls cancelled before they started (a not-executed result with no start record), and a crash
// after any prefix of the appends followed by recovery. After each, the messages after the
// assistant message are one tool message per call, in call order.

const CALLS = ["a", "b", "c", "d"];

function* permutations<T>(items: readonly T[]): Generator<T[]> {
  if (items.length <= 1) {
    yield [...items];
    return;
  }
  for (let i = 0; i < items.length; i++) {
    const rest = [...items.slice(0, i), ...items.slice(i + 1)];
    for (const p of permutations(rest)) yield [items[i], ...p];
  }
}

/** The log's appends for one order of results; `unstarted` calls are cancelled before start. */
function appends(order: readonly string[], unstarted: ReadonlySet<string>): EntryInput[] {
  const out: EntryInput[] = [
    { type: "turn_start", turnId: "t" },
    { type: "user_message", text: "go", turnId: "t" },
    { type: "attempt_start", turnId: "t", attemptId: "t.a1", step: 0 },
    {
      type: "assistant_message",
      turnId: "t",
      attemptId: "t.a1",
      finishReason: "tool_calls",
      content: CALLS.map((id) => ({ type: "tool-call", id, name: "tool", arguments: "{}" })),
    },
    { type: "attempt_end", attemptId: "t.a1", status: "completed" },
  ];
  for (const id of CALLS) {
    if (unstarted.has(id)) continue;
    out.push({
      type: "call_started",
      callId: id,
      name: "tool",
      args: {},
      idempotencyKey: `k-${id}`,
      idempotent: false,
    });
  }
  for (const id of order) {
    out.push(
      unstarted.has(id)
        ? {
            type: "call_result",
            callId: id,
            name: "tool",
            outcome: "not_executed",
            result: { ok: false, code: "CANCELLED", message: "not executed", retryable: false },
          }
        : {
            type: "call_result",
            callId: id,
            name: "tool",
            outcome: "completed",
            result: { ok: true, content: `result of ${id}` },
          },
    );
  }
  return out;
}

/** What the projection shows after the assistant message: tool messages' call ids, in order. */
type Project = (entries: readonly LogEntry[], log: SessionLog) => Promise<readonly Message[]>;

const realProjection: Project = async (_entries, log) => log.history();

/**
 * BROKEN on purpose (the check must catch it): a view that lists results in the order they
 * were appended, as a projection without slots would.
 */
const arrivalOrderProjection: Project = async (entries) => {
  const view: Message[] = [];
  for (const e of entries) {
    if (e.type === "assistant_message") view.push({ role: "assistant", content: e.content });
    if (e.type === "call_result")
      view.push({
        role: "tool",
        content: [{ type: "tool-result", callId: e.callId, name: e.name, content: "" }],
      });
  }
  return view;
};

function problemIn(view: readonly Message[]): string | undefined {
  const at = view.findIndex((m) => m.role === "assistant");
  if (at < 0) return "no assistant message";
  const tools = view.slice(at + 1).filter((m) => m.role === "tool");
  const ids = tools.map((m) => (m.role === "tool" ? m.content[0].callId : ""));
  if (JSON.stringify(ids) !== JSON.stringify(CALLS))
    return `tool results in the view: ${ids.join(",")}, calls: ${CALLS.join(",")}`;
  return undefined;
}

async function search(project: Project): Promise<{ cases: number; problem?: string }> {
  let cases = 0;
  const cancelChoices = [new Set<string>(), new Set(["c"]), new Set(["a", "d"])];
  for (const unstarted of cancelChoices) {
    for (const order of permutations(CALLS)) {
      const all = appends(order, unstarted);
      // Crash after every prefix (the whole log included: no crash), then recovery.
      for (let cut = 4; cut <= all.length; cut++) {
        cases++;
        const store = memoryStore();
        const ids = seededIds(cases);
        const log = await SessionLog.open({ sessionId: "s", store, clock: systemClock, ids });
        for (const input of all.slice(0, cut)) log.append(input);
        await log.flush();
        const reopened = await SessionLog.open({ sessionId: "s", store, clock: systemClock, ids });
        if (cut < all.length) await recoverSession(reopened, { isIdempotent: () => false });
        // Calls of the message that never started get their "not executed" results, as
        // recoverCalls writes them; their order is the projection's to fix.
        for (const c of reopened.unstartedCalls()) {
          reopened.append({
            type: "call_result",
            callId: c.callId,
            name: c.name,
            outcome: "not_executed",
            result: { ok: false, code: "CANCELLED", message: "not executed", retryable: false },
          });
        }
        const problem = problemIn(await project(reopened.entries(), reopened));
        if (problem) {
          return {
            cases,
            problem: `${problem} (order ${order}, cut ${cut}, unstarted ${[...unstarted]})`,
          };
        }
      }
    }
  }
  return { cases };
}

describe("invariant 4: the model sees each call's result once, in call order", () => {
  it("whatever order results arrive in, with cancels and a crash at any append and recovery (every case)", async () => {
    const { cases, problem } = await search(realProjection);
    expect(problem).toBeUndefined();
    expect(cases).toBeGreaterThan(500);
  });

  it("the search catches a view that lists results in arrival order", async () => {
    const { problem } = await search(arrivalOrderProjection);
    expect(problem).toMatch(/^tool results in the view: (?!a,b,c,d )/);
  });
});
