import { describe, expect, it } from "vitest";
import { answerInput, applyAnswer, readAnswer } from "../actors/durable-permissions.ts";
import { PermissionBroker } from "../actors/permissions.ts";
import type { PermissionRequest } from "../contracts/permission.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import {
  alwaysAllowedTools,
  decisionsFor,
  loggedRequests,
  openRequests,
} from "../session/permission-log.ts";
import { memoryStore } from "../session/stores/memory-store.ts";

let seq = 0;
const base = () => ({ id: `e${++seq}`, parentId: null, seq, at: seq });
const asked = (requestId: string, tool: string): EntryOf<"permission_request"> => ({
  ...base(),
  type: "permission_request",
  turnId: "t1",
  requestId,
  callId: requestId.replace(".perm", ""),
  tool,
  args: {},
  risk: "high",
});
const decided = (
  requestId: string,
  tool: string,
  reply: "allow_once" | "allow_always" | "deny",
): EntryOf<"permission_decision"> => ({
  ...base(),
  type: "permission_decision",
  turnId: "t1",
  requestId,
  callId: requestId.replace(".perm", ""),
  tool,
  decision: reply === "deny" ? { type: "declined", reason: "no" } : { type: "allow" },
  source: { type: "reply", reply },
});

describe("permission requests read from the log", () => {
  it("a request is open until a decision of its id follows it; the first decision is its decision", () => {
    const log: LogEntry[] = [
      asked("a.perm", "mark"),
      asked("b.perm", "mark"),
      decided("a.perm", "mark", "deny"),
      decided("a.perm", "mark", "allow_once"),
    ];
    expect(openRequests(log, "s").map((r) => r.requestId)).toEqual(["b.perm"]);
    expect(loggedRequests(log)[0]?.decision?.source).toEqual({ type: "reply", reply: "deny" });
  });

  it("allow_always is read back for the tool its own reply decided, never from a spread or an allow_once", () => {
    const spread: EntryOf<"permission_decision"> = {
      ...decided("c.perm", "other", "allow_always"),
      source: { type: "spread", reply: "allow_always", by: "a.perm" },
    };
    const log = [
      decided("a.perm", "mark", "allow_always"),
      decided("b.perm", "x", "allow_once"),
      spread,
    ];
    expect(alwaysAllowedTools(log)).toEqual(["mark"]);
  });

  it("a reply to a decided or unknown request writes nothing; a denial reaches every open request; allow_always the open ones of its tool", () => {
    const logged = loggedRequests([
      asked("a.perm", "mark"),
      asked("b.perm", "mark"),
      asked("c.perm", "look"),
      asked("d.perm", "mark"),
      decided("d.perm", "mark", "allow_once"),
    ]);
    expect(decisionsFor(logged, "d.perm", { type: "deny" })).toEqual([]);
    expect(decisionsFor(logged, "zz.perm", { type: "deny" })).toEqual([]);
    const denied = decisionsFor(logged, "a.perm", { type: "deny" }, "answer_1");
    expect(denied.map((d) => [d.requestId, d.decision.type, d.source.type, d.answerId])).toEqual([
      ["a.perm", "declined", "reply", "answer_1"],
      ["b.perm", "declined", "spread", undefined],
      ["c.perm", "declined", "spread", undefined],
    ]);
    const always = decisionsFor(logged, "a.perm", { type: "allow_always" });
    expect(always.map((d) => [d.requestId, d.source.type])).toEqual([
      ["a.perm", "reply"],
      ["b.perm", "spread"],
    ]);
    const once = decisionsFor(logged, "a.perm", { type: "allow_once" });
    expect(once.map((d) => d.requestId)).toEqual(["a.perm"]);
    const feedback = decisionsFor(logged, "c.perm", { type: "deny_with_feedback", feedback: "no" });
    expect(feedback[0]?.decision).toEqual({
      type: "corrected",
      feedback: "the user declined this call: no",
    });
  });

  it("a posted answer round-trips through an inbox input; an ordinary input is not an answer", () => {
    const input = answerInput({
      answerId: "answer_x",
      requestId: "a.perm",
      reply: { type: "deny" },
    });
    expect(readAnswer(input)).toEqual({
      answerId: "answer_x",
      requestId: "a.perm",
      reply: { type: "deny" },
    });
    expect(readAnswer({ ...input, id: "in_1" })).toBeUndefined();
    expect(readAnswer({ ...input, body: "hello" })).toBeUndefined();
  });
});

describe("answers applied by the owner", () => {
  const request: PermissionRequest = {
    requestId: "a.perm",
    sessionId: "s",
    callId: "a",
    tool: "mark",
    args: {},
    risk: "high",
  };
  const open = async () => {
    const log = await SessionLog.open({
      sessionId: "s",
      store: memoryStore(),
      clock: { now: () => 0, setTimeout, clearTimeout },
      ids: (p = "e") => `${p}_${++seq}`,
    });
    log.append({ type: "permission_request", turnId: "t1", ...request });
    return log;
  };

  it("two answers taken in one tick: the first decides the waiting request, the second writes nothing", async () => {
    const log = await open();
    const broker = new PermissionBroker({ ask: () => new Promise(() => {}) });
    const waiting = broker.request(request);
    expect(
      applyAnswer(log, broker, {
        requestId: "a.perm",
        reply: { type: "allow_once" },
        answerId: "answer_1",
      }),
    ).toBe(true);
    // The turn writes the first decision a microtask later; the second answer must not write one.
    expect(
      applyAnswer(log, broker, {
        requestId: "a.perm",
        reply: { type: "deny" },
        answerId: "answer_2",
      }),
    ).toBe(false);
    expect(log.entries().filter((e) => e.type === "permission_decision")).toEqual([]);
    expect(await waiting).toMatchObject({ decision: { type: "allow" }, answerId: "answer_1" });
  });

  it("an answer taken before the turn asks again is written to the log and resolves the request when it is asked", async () => {
    const log = await open();
    const broker = new PermissionBroker({ ask: () => new Promise(() => {}) });
    expect(applyAnswer(log, broker, { requestId: "a.perm", reply: { type: "allow_once" } })).toBe(
      true,
    );
    expect(log.entries().filter((e) => e.type === "permission_decision")).toHaveLength(1);
    expect(await broker.request(request)).toMatchObject({
      decision: { type: "allow" },
      logged: true,
    });
    expect(broker.waiting()).toEqual([]);
  });
});
