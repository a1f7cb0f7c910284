import fc from "fast-check";
import { parse as parsePartialJson } from "partial-json";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../tools/define-tool.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";
import type { PrepareOutcome, RawToolCall } from "../tools/types.ts";

const noop = async () => "ok";
/** Accepts every object, so only the text's completeness decides. */
const registry = createRegistry([
  defineTool({
    name: "any_object",
    description: "d",
    parameters: z.looseObject({}),
    execute: noop,
  }),
  defineTool({
    name: "read_file",
    description: "d",
    parameters: z.object({ path: z.string(), offset: z.number().optional() }),
    execute: noop,
  }),
  defineTool({
    name: "shell",
    description: "d",
    parameters: z.object({ command: z.string() }),
    execute: noop,
  }),
]);

type Prepare = (call: RawToolCall, reg: typeof registry) => PrepareOutcome;

/**
 * A deliberately broken preparation: when the strict steps reject the text, it "repairs" it by
 * closing whatever is open (partial-json), as several harnesses do. It must be caught.
 */
const closingMutant: Prepare = (call, reg) => {
  const outcome = prepareCall(call, reg);
  if (outcome.ok) return outcome;
  try {
    const closed = JSON.stringify(parsePartialJson(call.argumentsText));
    return closed === undefined ? outcome : prepareCall({ ...call, argumentsText: closed }, reg);
  } catch {
    return outcome;
  }
};

const argObject = fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 3 }), {
  maxKeys: 5,
});

/** Every strict, non-empty prefix of the object's JSON text (plain and pretty) is rejected. */
function prefixesRejected(prepare: Prepare) {
  return fc.property(argObject, fc.boolean(), (obj, pretty) => {
    const text = pretty ? JSON.stringify(obj, null, 2) : JSON.stringify(obj);
    const whole = prepare({ id: "c", name: "any_object", argumentsText: text }, registry);
    if (!whole.ok) return false;
    const step = Math.max(1, Math.floor(text.length / 400));
    for (let end = 1; end < text.length; end += step) {
      if (prepare({ id: "c", name: "any_object", argumentsText: text.slice(0, end) }, registry).ok)
        return false;
    }
    return true;
  });
}

describe("prepareCall properties", () => {
  it("returns an outcome and never throws, for arbitrary text and names", () => {
    const names = fc.oneof(
      fc.constantFrom("any_object", "read_file", "shell", "Bash", "READ-FILE", "LS", ""),
      fc.string(),
    );
    const texts = fc.oneof(
      fc.string({ unit: "binary" }),
      fc.json(),
      fc.json().chain((j) => fc.nat(j.length).map((n) => j.slice(0, n) + j.slice(n + 1))),
      fc
        .json()
        .chain((j) =>
          fc
            .tuple(fc.nat(j.length), fc.constantFrom("{", "}", '"', ",", "\\", "\u0000", "'", "["))
            .map(([n, c]) => j.slice(0, n) + c + j.slice(n)),
        ),
      fc.json().map((j) => JSON.stringify(j)),
      fc.tuple(fc.json(), fc.json()).map(([a, b]) => a + b),
    );
    fc.assert(
      fc.property(fc.string(), names, texts, (id, name, argumentsText) => {
        const outcome = prepareCall({ id, name, argumentsText }, registry);
        if (outcome.ok)
          return outcome.call.id === id && registry.get(outcome.call.name) === outcome.call.tool;
        return (
          ["UNKNOWN_TOOL", "INVALID_ARGS"].includes(outcome.error.code) &&
          /\nWhere: [\s\S]*\nReceived: [\s\S]*\nHow to fix: /.test(outcome.error.message)
        );
      }),
      { numRuns: 1000, seed: 1 },
    );
  });

  it("a valid argument object's JSON text passes with exactly its value", () => {
    fc.assert(
      fc.property(argObject, (obj) => {
        const text = JSON.stringify(obj);
        const outcome = prepareCall({ id: "c", name: "any_object", argumentsText: text }, registry);
        expect(outcome.ok && outcome.call.args).toEqual(JSON.parse(text));
      }),
      { seed: 2 },
    );
  });

  it("no strict non-empty prefix of a valid argument object's JSON is ever accepted", () => {
    fc.assert(prefixesRejected(prepareCall), { numRuns: 200, seed: 3 });
  });

  it("no strict prefix of double-encoded JSON is accepted", () => {
    fc.assert(
      fc.property(argObject, (obj) => {
        const text = JSON.stringify(JSON.stringify(obj));
        for (let end = 1; end < text.length; end++) {
          if (
            prepareCall(
              { id: "c", name: "any_object", argumentsText: text.slice(0, end) },
              registry,
            ).ok
          )
            return false;
        }
        return prepareCall({ id: "c", name: "any_object", argumentsText: text }, registry).ok;
      }),
      { numRuns: 100, seed: 4 },
    );
  });

  it("the prefix property fails on a mutant whose repair closes truncated JSON", () => {
    const result = fc.check(prefixesRejected(closingMutant), { numRuns: 200, seed: 42 });
    expect(result.failed).toBe(true);
  });
});
