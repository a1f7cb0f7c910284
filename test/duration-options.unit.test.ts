// Issue 41, "Every wait ends": every duration option goes through one helper (durationOption in
// contracts/clock.ts): finite and over 0, at most 2^31 − 1 ms, or clamped with a warning. A
// longer timer fires after 1 ms in Node: `callTimeoutMs: Infinity` timed every MCP call out at
// once, and a poll of 1e10 ms polled the database hundreds of times a second. The MCP options
// are tested against a real server in test/mcp-hostile.e2e.test.ts, the provider slots' poll
// rate against a real PostgreSQL in test/postgres-provider-slots.e2e.test.ts.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkSpec } from "../actors/acceptance-spec.ts";
import { startWorker } from "../actors/worker.ts";
import { durationOption, MAX_TIMER_MS } from "../contracts/clock.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

describe("duration options (issue 41)", () => {
  it("durationOption keeps a duration in range, clamps a longer one (warning for a finite one) and refuses the rest naming the option", () => {
    const warnings: string[] = [];
    const warn = (m: string) => warnings.push(m);
    expect(durationOption("x", undefined, 250, { warn })).toBe(250);
    expect(durationOption("x", 1, 250, { warn })).toBe(1);
    expect(durationOption("x", MAX_TIMER_MS, 250, { warn })).toBe(MAX_TIMER_MS);
    expect(durationOption("x", Number.POSITIVE_INFINITY, 250, { warn })).toBe(MAX_TIMER_MS);
    expect(warnings).toEqual([]);
    expect(durationOption("`pollMs`", 1e10, 250, { warn })).toBe(MAX_TIMER_MS);
    expect(warnings).toEqual([
      "`pollMs` of 10000000000 ms is over 2147483647 ms (2^31 − 1, the longest timer Node honours: a longer one fires at once); 2147483647 ms is used",
    ]);
    for (const bad of [0, -5, Number.NaN, Number.NEGATIVE_INFINITY, "100", null]) {
      expect(() => durationOption("`pollMs`", bad, 250, { warn })).toThrow(
        /`pollMs` must be a number of milliseconds from 1 to 2147483647/,
      );
    }
    expect(durationOption("x", 0, 5, { min: 0, warn })).toBe(0);
  });

  it("sqliteStore refuses a busyTimeoutMs of NaN (a lock wait that never ended) and takes 0", () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-dur-"));
    expect(() => sqliteStore(join(dir, "a.db"), { busyTimeoutMs: Number.NaN })).toThrow(
      /sqliteStore: `busyTimeoutMs` must be a number of milliseconds/,
    );
    sqliteStore(join(dir, "b.db"), { busyTimeoutMs: 0 }).close();
  });

  it("startWorker refuses a sweepMs or shutdownGraceMs out of range before it touches the database", async () => {
    const store = {} as never;
    await expect(startWorker({ store, model: {} as never, sweepMs: 0 })).rejects.toThrow(
      /startWorker: `sweepMs` must be a number of milliseconds/,
    );
    await expect(
      startWorker({ store, model: {} as never, shutdownGraceMs: Number.NaN }),
    ).rejects.toThrow(/startWorker: `shutdownGraceMs`/);
  });

  it("an acceptance check's timeoutMs over 2^31 − 1 ms is refused (its timer would fire at once)", () => {
    const spec = (timeoutMs: number) => ({
      checks: [{ name: "t", command: "true", timeoutMs }],
    });
    expect(() => checkSpec(spec(1e10) as never, "acceptance")).toThrow(
      /`timeoutMs` must be a whole number of milliseconds from 1 to 2147483647/,
    );
    expect(() => checkSpec(spec(60_000) as never, "acceptance")).not.toThrow();
  });
});
