import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ModelError, type ModelErrorKind } from "../contracts/model.ts";
import {
  ignoresDeadline,
  ignoresMaxRetriesOnZero,
  type PolicyImpl,
  reAddsDelay,
  realPolicy,
  reParsesLater,
} from "./support/mutants/retry-policy.mutants.ts";

/**
 * invariant 7 of docs/architecture.md, as a property over random fault sequences, random clock origins,
 * random request durations and random layer overheads: requests ≤ maxRetries + 1; no wait
 * crosses the operation deadline; a Retry-After is converted once and never extended or
 * waited twice across layers. Each mutant (test/support/mutants/retry-policy.mutants.ts) breaks one
 * clause and must be caught.
 */

type RetryAfterSpec =
  | { type: "none" }
  | { type: "seconds"; value: string }
  | { type: "ms"; value: number }
  | { type: "date"; offsetSec: number };

type Fault =
  | { kind: "http"; status: number; retryAfter: RetryAfterSpec }
  | { kind: Exclude<ModelErrorKind, "http" | "aborted" | "protocol"> }
  | { kind: "fatal" };

const retryAfterArb: fc.Arbitrary<RetryAfterSpec> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ type: "none" as const }) },
  { weight: 2, arbitrary: fc.constant({ type: "seconds" as const, value: "0" }) },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        fc.integer({ min: 0, max: 1200 }).map(String),
        fc.double({ min: 0, max: 90, noNaN: true }).map((d) => d.toFixed(2)),
      )
      .map((value) => ({ type: "seconds" as const, value })),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 0, max: 2_000_000 })
      .map((value) => ({ type: "ms" as const, value })),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: -100, max: 2000 })
      .map((offsetSec) => ({ type: "date" as const, offsetSec })),
  },
);

const faultArb: fc.Arbitrary<Fault> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("http" as const),
      status: fc.constantFrom(429, 503, 500, 529, 408),
      retryAfter: retryAfterArb,
    }),
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom<Fault>(
      { kind: "network" },
      { kind: "stream_cut" },
      { kind: "first_chunk_timeout" },
      { kind: "idle_timeout" },
    ),
  },
  { weight: 1, arbitrary: fc.constant<Fault>({ kind: "fatal" }) },
);

const scenarioArb = fc.record({
  policy: fc.record(
    {
      maxRetries: fc.integer({ min: 0, max: 5 }),
      maxTimeoutRetries: fc.integer({ min: 0, max: 3 }),
      baseDelayMs: fc.integer({ min: 0, max: 5000 }),
      maxDelayMs: fc.integer({ min: 5000, max: 60_000 }),
      jitter: fc.double({ min: 0, max: 0.5, noNaN: true }),
      maxRetryAfterMs: fc.integer({ min: 0, max: 1_000_000 }),
      operationDeadlineMs: fc.integer({ min: 1, max: 900_000 }),
    },
    { requiredKeys: ["maxRetries", "maxTimeoutRetries"] },
  ),
  startedAt: fc.integer({ min: 0, max: 1e9 }),
  wallOffset: fc.integer({ min: 1_600_000_000_000, max: 1_800_000_000_000 }),
  faults: fc.array(faultArb, { maxLength: 10 }),
  attempts: fc.array(
    fc.record({
      durationMs: fc.integer({ min: 0, max: 120_000 }),
      hasOutput: fc.boolean(),
      random: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      layerOverheads: fc.array(fc.integer({ min: 0, max: 20_000 }), { maxLength: 3 }),
    }),
    { minLength: 11, maxLength: 11 },
  ),
});
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

function toError(fault: Fault, wallNow: number): ModelError {
  if (fault.kind === "fatal")
    return new ModelError("400 prompt is too long", { kind: "http", status: 400 });
  if (fault.kind !== "http") return new ModelError(fault.kind, { kind: fault.kind });
  const ra = fault.retryAfter;
  const headers: Record<string, string> =
    ra.type === "seconds"
      ? { "retry-after": ra.value }
      : ra.type === "ms"
        ? { "retry-after-ms": String(ra.value) }
        : ra.type === "date"
          ? {
              "retry-after": new Date(
                Math.floor(wallNow / 1000) * 1000 + ra.offsetSec * 1000,
              ).toUTCString(),
            }
          : {};
  return new ModelError(`${fault.status}`, { kind: "http", status: fault.status, headers });
}

/**
 * The wait a Retry-After spec asks for, computed from what the test wrote into the header and
 * never by the parser under test: whole and decimal seconds in integer arithmetic, an HTTP-date
 * from the second it names, a date in the past as 0 ("already due"), then the cap.
 * `undefined` when no header was sent.
 */
function expectedRetryAfterMs(
  ra: RetryAfterSpec,
  wallNow: number,
  maxRetryAfterMs = 900_000,
): number | undefined {
  let ms: number;
  if (ra.type === "none") return undefined;
  if (ra.type === "ms") ms = ra.value;
  else if (ra.type === "date")
    ms = Math.max(0, Math.floor(wallNow / 1000) * 1000 + ra.offsetSec * 1000 - wallNow);
  else {
    const [whole, frac = ""] = ra.value.split(".");
    const thousandths = `${frac}000`.slice(0, 3);
    const rest = frac.slice(3).replace(/0+$/, "");
    ms = Number.parseInt(whole, 10) * 1000 + Number.parseInt(thousandths, 10) + (rest ? 1 : 0);
  }
  return Math.min(ms, maxRetryAfterMs);
}

/** Drives one operation: request → fault → decide → layers each wait what remains → request. */
function run(impl: PolicyImpl, sc: Scenario): string | undefined {
  const p = sc.policy;
  let now = sc.startedAt;
  let state = impl.initial(p, now);
  const deadline = sc.startedAt + (p.operationDeadlineMs ?? Number.POSITIVE_INFINITY);
  let requests = 0;
  let timeoutRetries = 0;
  for (let i = 0; ; i++) {
    requests++;
    if (requests > (p.maxRetries ?? 2) + 1)
      return `made ${requests} requests with maxRetries ${p.maxRetries}`;
    const a = sc.attempts[i];
    now += a.durationMs;
    const fault = sc.faults[i];
    if (!fault) return undefined;
    const wallNow = now + sc.wallOffset;
    const error = toError(fault, wallNow);
    const d = impl.decide(state, {
      error,
      now,
      wallNow,
      random: () => a.random,
      hasOutput: a.hasOutput,
    });
    if (d.action === "stop") return undefined;
    if (d.action !== (a.hasOutput ? "continue" : "retry"))
      return `action ${d.action} with hasOutput ${a.hasOutput}`;
    if (fault.kind.endsWith("timeout") || (fault.kind === "http" && fault.status === 408))
      timeoutRetries++;
    if (timeoutRetries > (p.maxTimeoutRetries ?? 1))
      return `timeout retries ${timeoutRetries} > ${p.maxTimeoutRetries}`;
    const decidedAt = now;
    const sent = fault.kind === "http" ? fault.retryAfter : ({ type: "none" } as const);
    const expected = expectedRetryAfterMs(sent, wallNow, p.maxRetryAfterMs);
    if (expected !== undefined && d.readyAt !== decidedAt + expected)
      return `Retry-After ${JSON.stringify(sent)} asks ${expected} ms, moved: readyAt ${d.readyAt - decidedAt} ms after the decision`;
    if ((expected !== undefined) !== (d.waitSource === "retry-after"))
      return `Retry-After ${JSON.stringify(sent)} sent but the wait came from ${d.waitSource}`;
    state = d.state;
    // Each layer (turn, attempt runner, lock, UI) does its own work, then waits what remains;
    // the last entry is the attempt runner itself, right before the request.
    let slept = 0;
    for (const overhead of [...a.layerOverheads, 0]) {
      now += overhead;
      const w = impl.remaining(state, now);
      if (w < 0) return `negative wait ${w}`;
      if (w > 0 && now + w !== d.readyAt)
        return `a layer slept ${w} ms at +${now - decidedAt}: past the ready time (waited twice)`;
      if (now + w >= deadline && w > 0)
        return `a wait ends at ${now + w}, at or past the deadline ${deadline}`;
      now += w;
      slept += w;
    }
    if (slept > Math.max(0, d.readyAt - decidedAt))
      return `slept ${slept} ms for a ${d.readyAt - decidedAt} ms wait`;
    if (d.readyAt >= deadline)
      return `retry scheduled at ${d.readyAt}, at or past the deadline ${deadline}`;
  }
}

const property = (impl: PolicyImpl) =>
  fc.property(scenarioArb, (sc) => {
    const violation = run(impl, sc);
    if (violation) throw new Error(violation);
  });

const mutantRuns = { numRuns: 3000, seed: 7 };

describe("retry policy invariant 7 of docs/architecture.md over random faults and clocks", () => {
  it("requests ≤ maxRetries + 1, no wait crosses the deadline, and a Retry-After is waited once", () => {
    fc.assert(property(realPolicy), { numRuns: 5000, seed: 42 });
  });

  it("catches a mutant whose layers each re-add the Retry-After delay", () => {
    const out = fc.check(property(reAddsDelay()), mutantRuns);
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/waited twice|slept|deadline/);
  });

  it("catches a mutant that ignores maxRetries when Retry-After is 0", () => {
    const out = fc.check(property(ignoresMaxRetriesOnZero), mutantRuns);
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/requests with maxRetries/);
  });

  it("catches a mutant that sleeps past the operation deadline", () => {
    const out = fc.check(property(ignoresDeadline), mutantRuns);
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/deadline/);
  });

  it("catches a mutant that re-parses Retry-After at a later clock reading (extends the deadline)", () => {
    const out = fc.check(property(reParsesLater), mutantRuns);
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/moved/);
  });
});
