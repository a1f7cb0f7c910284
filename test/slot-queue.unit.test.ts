import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { processSlots, providerKeyOf } from "../actors/provider-slots.ts";
import { SlotQueue } from "../machines/policies/slot-queue.ts";
import { scriptedModel } from "../providers/scripted-model.ts";

type Op =
  | { type: "request" }
  | { type: "cancel"; pick: number }
  | { type: "release"; pick: number };

const ops = fc.array(
  fc.oneof(
    fc.constant<Op>({ type: "request" }),
    fc.nat(50).map((pick): Op => ({ type: "cancel", pick })),
    fc.nat(50).map((pick): Op => ({ type: "release", pick })),
  ),
  { maxLength: 60 },
);

describe("SlotQueue", () => {
  it("under any sequence of requests, cancels and releases: never more than `limit` holders, FIFO service, no free slot while someone waits, a cancelled waiter never served", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), ops, (limit, sequence) => {
        const q = new SlotQueue<number>(limit);
        // The oracle: who holds, who waits in arrival order, computed from the operations alone.
        const holders: number[] = [];
        const waiting: number[] = [];
        let next = 0;
        for (const op of sequence) {
          if (op.type === "request") {
            const who = next++;
            const asked = q.request(who);
            if (holders.length < limit && waiting.length === 0) {
              expect(asked).toEqual({ granted: true });
              holders.push(who);
            } else {
              waiting.push(who);
              expect(asked).toEqual({ granted: false, position: waiting.length });
            }
          } else if (op.type === "cancel") {
            if (waiting.length === 0) {
              expect(q.cancel(-1)).toBe(false);
              continue;
            }
            const who = waiting.splice(op.pick % waiting.length, 1)[0]!;
            expect(q.cancel(who)).toBe(true);
            expect(q.cancel(who)).toBe(false);
          } else {
            if (holders.length === 0) {
              expect(() => q.release()).toThrow(RangeError);
              continue;
            }
            holders.splice(op.pick % holders.length, 1);
            const served = q.release();
            const expected = waiting.shift();
            expect(served).toBe(expected);
            if (expected !== undefined) holders.push(expected);
          }
          expect(q.held).toBe(holders.length);
          expect(q.waiting).toBe(waiting.length);
          expect(q.held).toBeLessThanOrEqual(limit);
          if (q.waiting > 0) expect(q.held).toBe(limit);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("a limit that is not an integer ≥ 1 is a RangeError that says what is expected", () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => new SlotQueue(bad)).toThrow(/integer ≥ 1/);
    }
  });
});

describe("processSlots", () => {
  it("serves waiters in the order they asked; an aborted waiter leaves at once with its reason and is never served; a release runs once however often it is called", async () => {
    const slots = processSlots({ p: 1 });
    const order: string[] = [];
    const first = await slots.acquire("p", { signal: new AbortController().signal });
    const positions: number[] = [];
    const ctl = new AbortController();
    const a = slots.acquire("p", {
      signal: new AbortController().signal,
      onQueued: (n) => positions.push(n),
    });
    const b = slots.acquire("p", { signal: ctl.signal, onQueued: (n) => positions.push(n) });
    const c = slots.acquire("p", {
      signal: new AbortController().signal,
      onQueued: (n) => positions.push(n),
    });
    expect(positions).toEqual([1, 2, 3]);
    const reason = new Error("gone");
    ctl.abort(reason);
    await expect(b).rejects.toBe(reason);
    void a.then(() => order.push("a"));
    void c.then(() => order.push("c"));
    first();
    first(); // twice: still one slot handed on
    const ra = await a;
    await new Promise((r) => setTimeout(r, 5));
    expect(order).toEqual(["a"]);
    ra();
    const rc = await c;
    expect(order).toEqual(["a", "c"]);
    rc();
    // Everything released: the next request goes at once.
    let queued = false;
    const d = await slots.acquire("p", {
      signal: new AbortController().signal,
      onQueued: () => {
        queued = true;
      },
    });
    expect(queued).toBe(false);
    d();
  });

  it("a key without a limit is never queued; an already aborted signal rejects without taking a slot; bad limits are TypeErrors naming the key", async () => {
    const slots = processSlots({ p: 1, q: Number.POSITIVE_INFINITY });
    expect(slots.limitOf("other")).toBeUndefined();
    expect(slots.limitOf("q")).toBeUndefined();
    expect(slots.limitOf("p")).toBe(1);
    const ctl = new AbortController();
    ctl.abort(new Error("early"));
    await expect(slots.acquire("p", { signal: ctl.signal })).rejects.toThrow("early");
    const free = await slots.acquire("p", { signal: new AbortController().signal });
    free();
    expect(() => processSlots({ openai: 0 })).toThrow(/openai must be an integer ≥ 1/);
    expect(() => processSlots({ openai: 2.5 })).toThrow(TypeError);
  });
});

describe("the provider key and the concurrency option", () => {
  it("the key is model.provider, else the name before its first ':' and '.'", () => {
    expect(providerKeyOf({ name: "openai:gpt-4o" })).toBe("openai");
    expect(providerKeyOf({ name: "openai.chat:gpt-4o" })).toBe("openai");
    expect(providerKeyOf({ name: "anthropic.messages:claude" })).toBe("anthropic");
    expect(providerKeyOf({ name: "vllm-east:llama" })).toBe("vllm-east");
    expect(providerKeyOf({ name: "openai:gpt-4o", provider: "azure-eu" })).toBe("azure-eu");
    expect(providerKeyOf({ name: "scripted" })).toBe("scripted");
  });

  it("createAgent refuses a bad limit with a TypeError naming the option and the key", () => {
    const model = scriptedModel([{ text: "hi" }]);
    expect(() => createAgent({ model, concurrency: { openai: 0 } })).toThrow(
      /createAgent: `concurrency`.openai must be an integer ≥ 1/,
    );
    expect(() => createAgent({ model, concurrency: { openai: 1.5 } })).toThrow(TypeError);
    expect(() => createAgent({ model, concurrency: { openai: 2 } })).not.toThrow();
  });
});
