import { describe, expect, it } from "vitest";
import { createIds, seededIds } from "../actors/ids.ts";

describe("createIds", () => {
  it("gives ids of the asked size in nanoid's alphabet, with the prefix before an underscore", () => {
    for (const size of [1, 2, 3, 4, 5, 15, 16, 17, 21, 64]) {
      const ids = createIds(size);
      for (let i = 0; i < 50; i++) {
        expect(ids()).toMatch(new RegExp(`^[A-Za-z0-9_-]{${size}}$`));
        expect(ids("call")).toMatch(new RegExp(`^call_[A-Za-z0-9_-]{${size}}$`));
      }
    }
  });

  it("does not repeat across many refills of its random pool, and uses every character", () => {
    const ids = createIds();
    const seen = new Set<string>();
    const chars = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const id = ids();
      seen.add(id);
      for (const c of id) chars.add(c);
    }
    expect(seen.size).toBe(20_000);
    expect(chars.size).toBe(64);
  });

  it("spreads characters evenly: no position is stuck (a pool read at the wrong offset would be)", () => {
    const ids = createIds(16);
    const first = new Set<string>();
    const last = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      const id = ids();
      first.add(id[0]);
      last.add(id[15]);
    }
    expect(first.size).toBeGreaterThan(60);
    expect(last.size).toBeGreaterThan(60);
  });

  it("rejects a size that is not a positive integer, saying what it got", () => {
    expect(() => createIds(0)).toThrow(/size must be an integer from 1 to 1024, got 0/);
    expect(() => createIds(2.5)).toThrow(/got 2.5/);
  });

  it("seededIds repeat for a seed", () => {
    const a = seededIds(7);
    const b = seededIds(7);
    expect([a(), a("x")]).toEqual([b(), b("x")]);
  });
});
