// The input limit beside the window (issue 40): `Model.maxInputTokens` from the providers'
// options, the known models and the command's environment.
import { describe, expect, it } from "vitest";
import { modelFor } from "../cli/provider.ts";
import { openaiModel } from "../providers/openai-model.ts";
import { knownModelLimits } from "../providers/openai-tokens.ts";

const env = { OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: "http://127.0.0.1:1/v1" };

describe("maxInputTokens", () => {
  it("openaiModel takes it beside contextWindow, and refuses one that is not a positive integer", () => {
    const m = openaiModel({ model: "local", env, contextWindow: 32_768, maxInputTokens: 8_000 });
    expect(m).toMatchObject({ contextWindow: 32_768, maxInputTokens: 8_000 });
    expect(
      openaiModel({ model: "local", env, contextWindow: 32_768 }).maxInputTokens,
    ).toBeUndefined();
    expect(() =>
      openaiModel({ model: "local", env, contextWindow: 32_768, maxInputTokens: 0 }),
    ).toThrow(/maxInputTokens must be a positive integer/);
  });

  it("a known model carries its input limit (gpt-5: 272 000 of a 400 000 window)", () => {
    expect(knownModelLimits("gpt-5")?.maxInputTokens).toBe(272_000);
    expect(openaiModel({ model: "gpt-5-mini", env }).maxInputTokens).toBe(272_000);
    expect(openaiModel({ model: "gpt-4o", env }).maxInputTokens).toBeUndefined();
  });

  it("the command reads KEEL_MAX_INPUT_TOKENS, and names it when it is not a number", () => {
    const m = modelFor("openai-compatible", {
      ...env,
      KEEL_MODEL: "local",
      KEEL_CONTEXT_WINDOW: "32768",
      KEEL_MAX_INPUT_TOKENS: "6000",
    });
    expect(m.maxInputTokens).toBe(6000);
    expect(() =>
      modelFor("openai-compatible", {
        ...env,
        KEEL_MODEL: "local",
        KEEL_CONTEXT_WINDOW: "32768",
        KEEL_MAX_INPUT_TOKENS: "lots",
      }),
    ).toThrow(/KEEL_MAX_INPUT_TOKENS must be a positive integer/);
    expect(
      modelFor("anthropic", { ANTHROPIC_API_KEY: "k", KEEL_MAX_INPUT_TOKENS: "9000" })
        .maxInputTokens,
    ).toBe(9000);
  });
});
