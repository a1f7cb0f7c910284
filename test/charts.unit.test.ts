import pino from "pino";
import { describe, expect, it } from "vitest";
import { declaredEffects } from "../actors/charts.ts";
import { TurnRun } from "../actors/turn-run.ts";
import { batchMachine } from "../machines/batch.machine.ts";
import { effect, isEffect } from "../machines/effect.ts";
import { toolCallMachine } from "../machines/tool-call.machine.ts";
import { attemptIdOf, cutAnswerReason, turnMachine } from "../machines/turn.machine.ts";

describe("the charts' effects are bound generically to the turn's effects object", () => {
  it("every effect a chart declares is in TurnRun's effects table, so a declared effect is never left unbound", () => {
    const names = declaredEffects();
    expect(names).toEqual(expect.arrayContaining(["startAttempt", "roundDone", "recordStart"]));
    const run = new TurnRun({ ids: () => "t1", logger: pino({ level: "silent" }) } as never);
    const table = (run as unknown as { effectsOf(): Record<string, unknown> }).effectsOf();
    for (const name of names) expect(typeof table[name], name).toBe("function");
    // And nothing in it that no chart declares (a stale entry would hide a renamed effect).
    expect(Object.keys(table).sort()).toEqual([...new Set(names)].sort());
  });

  it("only actions declared with effect() are effects: assign actions stay the chart's own", () => {
    expect(isEffect(effect())).toBe(true);
    expect(isEffect(() => {})).toBe(false);
    const turnActions = turnMachine.implementations.actions;
    expect(isEffect(turnActions.markCancelled)).toBe(false);
    expect(isEffect(turnActions.finalize)).toBe(true);
    expect(isEffect(batchMachine.implementations.actions.beginRound)).toBe(false);
    expect(isEffect(toolCallMachine.implementations.actions.settleCompleted)).toBe(false);
  });

  it("isEffect is false for anything that is not a marked function, and the mark is the registry's symbol (shared by every copy of Keel in a process)", () => {
    const mark = Symbol.for("keel.effect");
    expect(isEffect(undefined)).toBe(false);
    expect(isEffect(null)).toBe(false);
    expect(isEffect("finalize")).toBe(false);
    expect(isEffect({ [mark]: true })).toBe(false); // marked, but not an action
    expect((effect() as unknown as Record<symbol, unknown>)[mark]).toBe(true);
    expect(isEffect(Object.assign(() => {}, { [mark]: true }))).toBe(true);
  });
});

describe("the turn chart's pure helpers", () => {
  it("cutAnswerReason says why a final answer is incomplete, and nothing for a plain stop", () => {
    expect(cutAnswerReason("length")).toBe(
      "the answer was cut at the model's output limit (finish_reason: length); it is incomplete",
    );
    expect(cutAnswerReason("content_filter")).toBe(
      "the provider's content filter stopped the answer (finish_reason: content_filter); it is incomplete",
    );
    expect(cutAnswerReason("stop")).toBeUndefined();
    expect(cutAnswerReason("tool_calls")).toBeUndefined();
    expect(cutAnswerReason("")).toBeUndefined();
  });

  it("attemptIdOf names attempt n of a turn as <turnId>.a<n>", () => {
    expect(attemptIdOf("t1", 0)).toBe("t1.a0");
    expect(attemptIdOf("turn_x", 12)).toBe("turn_x.a12");
  });
});
