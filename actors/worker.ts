import { createRequire } from "node:module";
import type * as GraphileWorker from "graphile-worker";
import type { Runner } from "graphile-worker";
import { durationOption } from "../contracts/clock.ts";
import { loadPeer } from "../contracts/optional-peer.ts";
import type { PostgresSessionStore } from "../session/stores/postgres-store.ts";
import { createAgent } from "./agent.ts";
import type { AgentOptions } from "./agent-options.ts";
import type { Session } from "./session.ts";
import { defaultLeaseOwner } from "./take-lease.ts";

/** The graphile-worker task that runs one session. */
export const SESSION_TASK = "keel_session";

/** Options of {@link startWorker}: an agent's options (model, tools, limits, …) and the PostgreSQL store. */
export interface WorkerOptions extends Omit<AgentOptions, "store" | "lease" | "concurrency"> {
  store: PostgresSessionStore;
  /** Sessions run at once by this process (default 4). */
  concurrency?: number;
  /**
   * Model requests in flight per provider: the agent's `concurrency` (a map, or slots shared
   * by every worker: `postgresProviderSlots`, docs/many-processes.md).
   */
  providerConcurrency?: AgentOptions["concurrency"];
  /** Lease duration (default 10 000 ms; renewed every third). */
  leaseTtlMs?: number;
  /** How often owners re-read posted inputs (default 1 000 ms). */
  pollMs?: number;
  /** How often this worker looks for sessions nobody runs (crashed owners, missed jobs). Default 2 000 ms. */
  sweepMs?: number;
  /** On stop: how long running turns may finish before they are interrupted (default 10 000 ms). */
  shutdownGraceMs?: number;
  /** This process's name in lease rows (default `host:pid`). */
  owner?: string;
}

/** A running worker (see {@link startWorker}). */
export interface Worker {
  /** Sessions this worker runs now. */
  running(): string[];
  /**
   * Graceful stop (what SIGTERM does): takes no new session, lets running turns finish for
   * `shutdownGraceMs`, then interrupts and settles them, flushes, and releases their leases
   * (marking queued work pending, so another worker takes it).
   */
  stop(): Promise<void>;
}

/**
 * Runs sessions that have unconsumed inputs and no live owner (docs/many-processes.md), dispatched by
 * graphile-worker (LISTEN/NOTIFY job pickup; the job library owns queueing, retries and
 * locking). An input posted by any process enqueues a `keel_session` job keyed by the session in
 * the same transaction (a trigger on Keel's inbox table; a job for a session already queued is
 * merged, and one for a session being run is queued again after it), and a periodic sweep
 * enqueues sessions whose owner died or left work pending. A job takes the session's lease (or
 * leaves at once when a live owner has it: that owner gets the input through the doorbell), runs
 * its turns until nothing is queued, and releases the lease. After the release the worker reads
 * the inbox once more and enqueues the session again if an input came meanwhile: a job that input
 * queued may have found the lease still held (or this worker still running the session) and
 * ended, so without this look the input would wait for a sweep.
 */
export async function startWorker(options: WorkerOptions): Promise<Worker> {
  const { store, concurrency = 4 } = options;
  const sweepMs = durationOption("startWorker: `sweepMs`", options.sweepMs, 2000);
  const shutdownGraceMs = durationOption(
    "startWorker: `shutdownGraceMs`",
    options.shutdownGraceMs,
    10_000,
  );
  const s = store.schema;
  const { Logger, run, runMigrations } = loadPeer<typeof GraphileWorker>(
    createRequire(import.meta.url),
    "graphile-worker",
    "startWorker (keel worker)",
  );
  const quiet = new Logger(() => () => {});
  await runMigrations({ pgPool: store.pool, logger: quiet });
  // Several workers start together: install the trigger once, under a transaction lock.
  await store.pool.query(`
    BEGIN;
    SELECT pg_advisory_xact_lock(hashtext('keel worker trigger ${s.replaceAll('"', "")}'));
    CREATE OR REPLACE FUNCTION ${s}.enqueue_session() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM graphile_worker.add_job('${SESSION_TASK}', json_build_object('sessionId', NEW.session_id),
        job_key := 'keel:' || TG_TABLE_SCHEMA || ':' || NEW.session_id, job_key_mode := 'replace', max_attempts := 100);
      RETURN NEW;
    END $$;
    CREATE OR REPLACE TRIGGER inbox_enqueue AFTER INSERT ON ${s}.inbox FOR EACH ROW EXECUTE FUNCTION ${s}.enqueue_session();
    COMMIT;
  `);
  const { concurrency: _sessions, providerConcurrency, ...agentOptions } = options;
  const agent = createAgent({
    ...agentOptions,
    concurrency: providerConcurrency,
    store,
    lease: {
      owner: options.owner ?? defaultLeaseOwner(),
      ttlMs: options.leaseTtlMs ?? 10_000,
      pollMs: options.pollMs ?? 1000,
    },
  });
  const running = new Map<string, Session>();
  let stopping = false;
  const keyPrefix = `keel:${s.replaceAll('"', "")}:`;
  /**
   * Enqueues these sessions in one transaction, skipping those whose job already waits (unlocked,
   * attempts left, due: a worker takes it as it is). Every add_job is a transaction with a
   * NOTIFY, which PostgreSQL commits one at a time (a cluster-wide lock): re-adding waiting jobs is
   * load, not progress. A job locked by a dead worker is not waiting: add_jobs takes its key and
   * queues a new one.
   */
  const enqueue = async (sessionIds: string[]) => {
    if (sessionIds.length === 0) return;
    const due = await store.pool.query<{ id: string }>(
      `SELECT u.sid AS id FROM unnest($1::text[]) AS u(sid)
       WHERE NOT EXISTS (SELECT 1 FROM graphile_worker.jobs j WHERE j.key = $2::text || u.sid
         AND j.locked_at IS NULL AND j.attempts < j.max_attempts AND j.run_at <= now())`,
      [sessionIds, keyPrefix],
    );
    if (due.rows.length === 0) return;
    await store.pool.query(
      `SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
         SELECT ROW($1::text, json_build_object('sessionId', u.sid), NULL, NULL, 100, $2::text || u.sid, NULL, NULL)::graphile_worker.job_spec
         FROM unnest($3::text[]) AS u(sid)))`,
      [SESSION_TASK, keyPrefix, due.rows.map((r) => r.id)],
    );
  };
  /** Whether the session needs a runner now: what the sweep looks for, for one session. */
  const needsRunner = async (sessionId: string) =>
    (
      await store.pool.query(
        `SELECT 1 FROM (SELECT $1::text AS sid) x
         WHERE (EXISTS (SELECT 1 FROM ${s}.inbox i WHERE i.session_id = x.sid AND NOT i.taken)
             OR EXISTS (SELECT 1 FROM ${s}.leases l WHERE l.session_id = x.sid
                  AND ((l.released AND l.pending) OR (NOT l.released AND l.expires_at <= clock_timestamp()))))
           AND NOT EXISTS (SELECT 1 FROM ${s}.leases l WHERE l.session_id = x.sid
                  AND NOT l.released AND l.expires_at > clock_timestamp())`,
        [sessionId],
      )
    ).rows.length > 0;

  const runSession = async (sessionId: string) => {
    // Already running here: the run reads the inbox before it releases, and looks again after.
    if (stopping || running.has(sessionId)) return;
    const session = agent.session(sessionId);
    running.set(sessionId, session);
    try {
      await session.ready;
      if (session.role !== "owner") return; // a live owner runs it; its doorbell got the input
      session.resume();
      do {
        await session.syncInputs();
        await session.awaitIdle();
      } while (!stopping && session.role === "owner" && session.busy);
    } finally {
      await session.close().catch(() => {});
      running.delete(sessionId);
      // The no-lost-wake-up rule across the release: an input posted after the last pull, whose
      // job ended because the lease was still held or the session still ran here, is seen now.
      // (Not while stopping: this worker would take the job and drop it; the others' sweeps see
      // the pending lease.)
      if (!stopping && (await needsRunner(sessionId).catch(() => false)))
        await enqueue([sessionId]).catch(() => {});
    }
  };

  const runner: Runner = await run({
    pgPool: store.pool,
    concurrency,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: quiet,
    taskList: {
      [SESSION_TASK]: async (payload) => {
        await runSession((payload as { sessionId: string }).sessionId);
      },
    },
  });

  // One sweep at a time, enqueueing what it found in one transaction: under load a sweep may
  // take longer than its interval, and overlapping sweeps of one add_job per session each filled
  // the pool's queue faster than it drained (thousands waiting), starving lease renewals (more
  // leases lost, more sessions to sweep) and graphile-worker's own job fetches (nothing ran).
  let sweeping = false;
  const sweep = setInterval(() => {
    if (stopping || sweeping) return;
    sweeping = true;
    store
      .sessionsNeedingRunner(100)
      .then((ids) => enqueue(ids.filter((id) => !running.has(id))))
      .catch(() => {})
      .finally(() => {
        sweeping = false;
      });
  }, sweepMs);
  sweep.unref();

  return {
    running: () => [...running.keys()],
    async stop() {
      if (stopping) return;
      stopping = true;
      clearInterval(sweep);
      // The sessions this worker runs, not agent.session(id): that opens a new one (and takes
      // its lease) when the run is already closing it.
      const idle = Promise.all(
        [...running.values()].map((session) => session.awaitIdle().catch(() => {})),
      );
      await Promise.race([idle, new Promise((r) => setTimeout(r, shutdownGraceMs))]);
      await agent.close(); // interrupts what still runs, settles, flushes, releases leases
      await runner.stop();
    },
  };
}
