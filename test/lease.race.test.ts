import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import type { Lease, LeaseStore, SessionStore } from "../session/store.ts";
import { sqliteDatabase } from "../session/stores/sqlite-handle.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { storeIgnoresFence } from "./support/mutants/store-ignores-fence.ts";

// invariant 13 of docs/architecture.md: one writer per session — an append from a runner that lost its
// lease is refused — and every acknowledged input is consumed exactly once across processes.
// Two runners (each standing for a process) share one real SQLite store; the fast-check
// scheduler interleaves their store calls with inputs posted by a third party, lease expiries
// (a manual clock: a runner paused past its lease) and crashes (a runner forgets everything).

const dir = mkdtempSync(join(tmpdir(), "keel-lease-race-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const TTL = 100;
let files = 0;

type Shared = SessionStore & LeaseStore;

/** One process's runner: the lease it believes it holds and the log state it loaded. */
interface Runner {
  name: string;
  lease: Lease | null;
  received: Set<string>;
  consumed: Set<string>;
  seq: number;
  /**
   * The step in progress: a runner's steps run one at a time, as a real owner's pulls do
   * (`pullInputs` coalesces); two runners, or a crashed runner's leftover step, still overlap.
   */
  busy?: Promise<void>;
}

/** Runs `r`'s next step after the one it has in progress. */
function stepAfter(store: Shared, r: Runner): Promise<void> {
  const next = (r.busy ?? Promise.resolve()).then(() => step(store, r));
  r.busy = next.catch(() => {});
  return next;
}

const entry = (r: Runner, type: "inbox" | "inbox_consumed", inboxId: string): LogEntry =>
  ({
    type,
    inboxId,
    id: `${r.name}-${r.seq + 1}-${inboxId}-${type}`,
    parentId: null,
    seq: ++r.seq,
    at: 0,
    token: r.lease?.token,
    source: "user",
    lane: "next-turn",
    body: "b",
  }) as unknown as LogEntry;

/** One step of a runner, as a real runner does it: take the lease (and load), or move posted inputs in and consume them. */
async function step(store: Shared, r: Runner): Promise<void> {
  if (!r.lease) {
    const lease = await store.acquireLease("s", r.name, TTL);
    if (!lease) return;
    const log = await store.load("s");
    r.lease = lease;
    r.seq = log.length ? log[log.length - 1].seq : 0;
    r.received = new Set(
      log.filter((e) => e.type === "inbox").map((e) => (e as { inboxId: string }).inboxId),
    );
    r.consumed = new Set(
      log.filter((e) => e.type === "inbox_consumed").map((e) => (e as { inboxId: string }).inboxId),
    );
    return;
  }
  const posted = await store.postedInputs("s");
  const batch: LogEntry[] = [];
  const seq = r.seq;
  for (const p of posted) if (!r.received.has(p.id)) batch.push(entry(r, "inbox", p.id));
  const queued = [
    ...r.received,
    ...batch.map((e) => (e as unknown as { inboxId: string }).inboxId),
  ].filter((id) => !r.consumed.has(id));
  for (const id of queued) batch.push(entry(r, "inbox_consumed", id));
  if (batch.length === 0) return;
  try {
    await store.append("s", batch, { lease: r.lease });
  } catch {
    r.seq = seq;
    r.lease = null; // FENCED (or a seq conflict): reload before writing again
    return;
  }
  for (const e of batch) {
    const id = (e as unknown as { inboxId: string }).inboxId;
    (e.type === "inbox" ? r.received : r.consumed).add(id);
  }
  await store.markTaken(
    "s",
    posted.map((p) => p.id),
  );
}

type Op =
  | { k: "step"; r: 0 | 1 }
  | { k: "post"; id: number }
  | { k: "expire" }
  | { k: "crash"; r: 0 | 1 };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      k: fc.constant("step" as const),
      r: fc.constantFrom(0 as const, 1 as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant("post" as const), id: fc.integer({ min: 0, max: 5 }) }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("expire" as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("crash" as const),
      r: fc.constantFrom(0 as const, 1 as const),
    }),
  },
);

/** Runs ops with their store calls interleaved by the scheduler; returns a violation or null. */
async function explore(broken: boolean, ops: Op[], s: fc.Scheduler): Promise<string | null> {
  let now = 1_000;
  const real = sqliteStore(join(dir, `f${++files}.db`), { now: () => now });
  // Every committed entry is checked in the transaction that writes it (the store commits appends
  // in groups, after the call returns): a trigger of this connection records the entry's lease
  // token beside the session's lease token at that moment.
  const db = sqliteDatabase(real);
  db.exec(`CREATE TEMP TABLE audit (written INTEGER, current INTEGER);
    CREATE TEMP TRIGGER audit_entries AFTER INSERT ON main.entries BEGIN
      INSERT INTO audit VALUES (json_extract(NEW.body, '$.token'),
        (SELECT token FROM main.leases WHERE session_id = NEW.session_id));
    END;`);
  const violations = () =>
    db
      .prepare<[], { written: number; current: number }>(
        "SELECT written, current FROM audit WHERE written IS NOT current",
      )
      .all()
      .map(
        (v) =>
          `a runner holding lease token ${v.written} wrote while token ${v.current} owned the session: two writers`,
      );
  const store: Shared = broken ? storeIgnoresFence(real) : real;
  const runners: Runner[] = ["A", "B"].map((name) => ({
    name,
    lease: null,
    received: new Set(),
    consumed: new Set(),
    seq: 0,
  }));
  const acked = new Set<string>();
  const work = ops.map((op) =>
    s.schedule(Promise.resolve(op.k)).then(async () => {
      if (op.k === "step") await stepAfter(store, runners[op.r]);
      else if (op.k === "post") {
        await store.postInput("s", {
          id: `i${op.id}`,
          lane: "next-turn",
          source: "user",
          body: "b",
        });
        acked.add(`i${op.id}`);
      } else if (op.k === "expire")
        now += TTL + 1; // every lease held now lapses (a pause)
      else
        runners[op.r] = {
          name: runners[op.r].name,
          lease: null,
          received: new Set(),
          consumed: new Set(),
          seq: 0,
        };
    }),
  );
  await s.waitFor(Promise.all(work));
  // Quiescence: the clock moves on and one runner drains what is left (the truth is the store).
  now += TTL + 1;
  for (let i = 0; i < 3; i++) await stepAfter(real, runners[0]);
  const log = await real.load("s");
  const violation = violations()[0];
  await real.close();
  if (violation) return violation;
  const tokens = log.map((e) => (e as unknown as { token: number }).token);
  for (let i = 1; i < tokens.length; i++) {
    if (tokens[i] < tokens[i - 1])
      return `a write with lease token ${tokens[i]} landed after token ${tokens[i - 1]}'s: two writers`;
  }
  const consumed = log
    .filter((e) => e.type === "inbox_consumed")
    .map((e) => (e as { inboxId: string }).inboxId);
  const twice = consumed.find((id, i) => consumed.indexOf(id) !== i);
  if (twice) return `input ${twice} consumed twice`;
  const lost = [...acked].find((id) => !consumed.includes(id));
  if (lost) return `acknowledged input ${lost} never consumed`;
  return null;
}

describe("invariant 13 of docs/architecture.md: one writer per session, every acknowledged input consumed exactly once", () => {
  it("holds in every explored interleaving of two runners, posts, lease expiries and crashes (real SQLite store)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(opArb, { minLength: 4, maxLength: 14 }),
        async (s, ops) => {
          expect(await explore(false, ops, s)).toBeNull();
        },
      ),
      { numRuns: 150 },
    );
  });

  it("catches a store that does not fence (mutant): a runner paused past its lease writes beside the new owner", async () => {
    const outcome = await fc.check(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(opArb, { minLength: 4, maxLength: 14 }),
        async (s, ops) => {
          expect(await explore(true, ops, s)).toBeNull();
        },
      ),
      { numRuns: 400 },
    );
    expect(outcome.failed).toBe(true);
    expect(String(outcome.errorInstance)).toMatch(/a runner holding lease token|consumed twice/);
  });
});
