import { describe, expect, it } from "vitest";
import { MAX_CONTINUATIONS, resolveRecovery } from "../actors/recover-calls.ts";

describe("createAgent({ recovery })", () => {
  it("continues cut turns by default, up to the default bound; close closes them; an explicit bound continues with it", () => {
    expect(resolveRecovery(undefined)).toEqual({ maxContinuations: MAX_CONTINUATIONS });
    expect(resolveRecovery("continue")).toEqual({ maxContinuations: MAX_CONTINUATIONS });
    expect(resolveRecovery("close")).toBeUndefined();
    expect(resolveRecovery({ maxContinuations: 0 })).toEqual({ maxContinuations: 0 });
  });

  it("anything else is a TypeError that names what is expected", () => {
    for (const bad of ["resume", { maxContinuations: -1 }, { maxContinuations: 1.5 }, null]) {
      expect(() => resolveRecovery(bad as never)).toThrow(
        /recovery must be "continue", "close" or \{ maxContinuations: n \}/,
      );
    }
  });
});
