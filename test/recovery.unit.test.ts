import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import { NO_RESULT_TEXT } from "../session/projection.ts";
import { planRecovery, recoverSession } from "../session/recovery.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { call, openLog, result, started, step, user } from "./session-fixtures.ts";
import {
  failedOutputViolation,
  IDEM_TOOL,
  opArb,
  playOps,
  referenceProject,
  wellFormedViolation,
} from "./session-random-log.ts";
import {
  noPatch,
  projectsFailedAttempts,
  type RecoveryImpl,
  rerunsEverything,
  trustsCurrentTrait,
} from "./support/mutants/recovery.mutants.ts";

const isIdempotent = (name: string) =>
  name === IDEM_TOOL ? true : name === "plain_tool" ? false : undefined;

describe("recovery", () => {
  it("planRecovery lists started calls without results, open attempts and the open turn", async () => {
    const log = await openLog();
    log.append({ type: "turn_start", turnId: "t1" });
    step(log, "a1", "", [call("c1", "write"), call("c2", "read")]);
    log.append(started("c1"));
    log.append(started("c2", true));
    log.append(result("c2", "ok"));
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a2", step: 1 });
    expect(planRecovery(log.entries())).toEqual({
      unknownCalls: [
        { callId: "c1", name: "tool", args: {}, idempotencyKey: "key-c1", idempotent: false },
      ],
      openAttempts: ["a2"],
      committedAttempts: [],
      openTurn: "t1",
    });
  });

  it("a non-idempotent call with a start and no result is never re-run: it gets an OUTCOME_UNKNOWN result saying to check", async () => {
    const store = memoryStore();
    const before = await openLog(store);
    before.append({ type: "turn_start", turnId: "t1" });
    step(before, "a1", "", [call("c1", "plain_tool")]);
    before.append({ ...started("c1", false, "plain_tool") });
    await before.flush(); // crash here: the effect may have happened
    const log = await openLog(store, "s1", 2);
    const report = await recoverSession(log, { isIdempotent });
    expect(report.retry).toEqual([]);
    expect(
      report.unknown.map((e) => [e.callId, e.outcome, e.result.ok ? "" : e.result.code]),
    ).toEqual([["c1", "unknown", "OUTCOME_UNKNOWN"]]);
    const tool = log.messages().find((m) => m.role === "tool")!;
    expect(tool.content).toMatch(/may or may not have taken effect/);
    expect(tool.content).toMatch(/Check the current state/);
    expect(log.messages().at(-1)?.content).toMatch(
      /cut short: the process ended while these tool calls were running: plain_tool \(c1\)/,
    );
    expect(report.endedTurn).toBe("t1");
    expect(log.pendingCount()).toBe(0);
  });

  it("an idempotent call is returned for retry with its original idempotency key, and recovery is repeatable", async () => {
    const log = await openLog();
    log.append({ type: "turn_start", turnId: "t1" });
    step(log, "a1", "", [call("c1", IDEM_TOOL)]);
    log.append(started("c1", true, IDEM_TOOL));
    const report = await recoverSession(log, { isIdempotent });
    expect(report.retry.map((c) => [c.callId, c.idempotencyKey])).toEqual([["c1", "key-c1"]]);
    const again = await recoverSession(log, { isIdempotent });
    expect(again.retry.map((c) => c.callId)).toEqual(["c1"]);
    expect(again.unknown).toEqual([]);
    expect(again.endedTurn).toBeNull();
  });

  it("an idempotent start record is not retried when the tool is now unknown or not idempotent", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1", "gone")]);
    log.append(started("c1", true, "gone"));
    const report = await recoverSession(log, { isIdempotent });
    expect(report.retry).toEqual([]);
    expect(report.unknown.length).toBe(1);
  });

  it("the flag logged at start wins: a call logged non-idempotent is not re-run though its tool is idempotent now", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1", IDEM_TOOL)]);
    log.append(started("c1", false, IDEM_TOOL));
    const report = await recoverSession(log, { isIdempotent });
    expect(report.retry).toEqual([]);
    expect(report.unknown.map((e) => [e.callId, e.outcome, e.result])).toEqual([
      ["c1", "unknown", expect.objectContaining({ code: "OUTCOME_UNKNOWN" })],
    ]);
  });

  it("an attempt cut before its message ends interrupted; one whose message was committed ends completed", async () => {
    const log = await openLog();
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a1", step: 0 });
    log.append({
      type: "assistant_message",
      turnId: "t1",
      attemptId: "a1",
      content: [{ type: "text", text: "kept" }],
      finishReason: "stop",
    });
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a2", step: 1 });
    const report = await recoverSession(log, { isIdempotent });
    expect(report.plan.committedAttempts).toEqual(["a1"]);
    expect(report.plan.openAttempts).toEqual(["a2"]);
    const ends = log.entries().filter((e) => e.type === "attempt_end");
    expect(ends.map((e) => [e.attemptId, e.status])).toEqual([
      ["a1", "completed"],
      ["a2", "interrupted"],
    ]);
    expect(log.messages().map((m) => m.content)).toEqual(["kept"]);
  });
});

/** What the property runs; the mutants (test/support/mutants/recovery.mutants.ts) swap one part. */
type Impl = RecoveryImpl;

const real: Impl = {
  project: (log) => log.messages(),
  recover: (log) => recoverSession(log, { isIdempotent }),
};

/** Plays random ops, crashes (keeps a random prefix of the stored log), reopens, recovers. */
async function crashAndRecover(
  impl: Impl,
  ops: Parameters<typeof playOps>[1],
  cut: number,
  seed: number,
): Promise<void> {
  const source = await openLog(memoryStore(), "live", seed);
  playOps(source, ops);
  const all = source.entries();
  const survived: LogEntry[] = all.slice(0, cut % (all.length + 1));
  const store = memoryStore();
  await store.append("s", survived);
  const log = await openLog(store, "s", seed + 1);
  const check = (when: string) => {
    const messages = impl.project(log);
    const bad = wellFormedViolation(messages);
    if (bad) throw new Error(`${when}: invariant 1 of docs/architecture.md broken: ${bad}`);
    const failed = failedOutputViolation(messages, log.path());
    if (failed) throw new Error(`${when}: invariant 9 of docs/architecture.md broken: ${failed}`);
  };
  check("after reopening");
  const report = await impl.recover(log);
  for (const retried of report.retry) {
    const start = survived.find((e) => e.type === "call_started" && e.callId === retried.callId);
    if (start?.type !== "call_started" || !start.idempotent || isIdempotent(start.name) !== true) {
      throw new Error(
        `invariant 8 of docs/architecture.md broken: ${retried.name} (${retried.callId}) has a logged start and is not idempotent, yet recovery re-runs it`,
      );
    }
    if (retried.idempotencyKey !== start.idempotencyKey)
      throw new Error("invariant 8 of docs/architecture.md broken: retry with a different key");
    log.append({
      type: "call_result",
      callId: retried.callId,
      name: retried.name,
      outcome: "completed",
      result: { ok: true, content: "retried" },
    });
  }
  check("after recovery");
  // every started call on the path now has an outcome: no patch stands for a call that started
  const startedOnPath = new Set(
    log.path().flatMap((e) => (e.type === "call_started" ? [e.callId] : [])),
  );
  for (const m of log.messages()) {
    if (m.role === "tool" && startedOnPath.has(m.tool_call_id) && m.content === NO_RESULT_TEXT) {
      throw new Error(`call ${m.tool_call_id} started but recovery left it without an outcome`);
    }
  }
  expect(log.messages()).toEqual(referenceProject(log.path()));
  expect(planRecovery(log.entries()).unknownCalls.map((c) => c.callId)).toEqual([]);
}

const crashProperty = (impl: Impl) =>
  fc.asyncProperty(fc.array(opArb, { maxLength: 30 }), fc.nat(), fc.nat(1000), (ops, cut, seed) =>
    crashAndRecover(impl, ops, cut, seed),
  );

describe("recovery after a crash at a random point", () => {
  it("the projection stays well-formed (inv. 1), no non-idempotent started call is re-run (inv. 8), no failed attempt output shows (inv. 9)", async () => {
    await fc.assert(crashProperty(real), { numRuns: 200 });
  });

  it("MUTANT: a projection that does not patch missing results is caught (invariant 1 of docs/architecture.md)", async () => {
    const out = await fc.check(crashProperty(noPatch(real)), { numRuns: 300 });
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/invariant 1 of docs\/architecture\.md/);
  });

  it("MUTANT: a recovery that re-runs non-idempotent calls is caught (invariant 8 of docs/architecture.md)", async () => {
    const out = await fc.check(crashProperty(rerunsEverything(real)), { numRuns: 300 });
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/invariant 8 of docs\/architecture\.md/);
  });

  it("MUTANT: a recovery that trusts the tool's current trait over the flag logged at start is caught (invariant 8 of docs/architecture.md)", async () => {
    const out = await fc.check(crashProperty(trustsCurrentTrait(real, isIdempotent)), {
      numRuns: 300,
    });
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/invariant 8 of docs\/architecture\.md/);
  });

  it("MUTANT: a projection that includes failed/interrupted attempts is caught (invariant 9 of docs/architecture.md)", async () => {
    const out = await fc.check(crashProperty(projectsFailedAttempts(real)), { numRuns: 300 });
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/invariant 9 of docs\/architecture\.md/);
  });
});

describe("recovery keeps user data", () => {
  it("user messages written before the crash are all still projected after recovery", async () => {
    const store = memoryStore();
    const log = await openLog(store);
    log.append(user("one"));
    log.append(user("two"));
    await log.flush();
    const reopened = await openLog(store, "s1", 5);
    await recoverSession(reopened, { isIdempotent });
    expect(reopened.messages().map((m) => m.content)).toEqual(["one", "two"]);
  });
});
