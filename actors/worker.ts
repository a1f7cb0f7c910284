import { Logger, type Runner, run, runMigrations } from "graphile-worker";
import type { PostgresSessionStore } from "../session/postgres-store.ts";
import { type AgentOptions, createAgent } from "./agent.ts";
import { defaultLeaseOwner, type Session } from "./session-runtime.ts";

/** The graphile-worker task that runs one session. */
export const SESSION_TASK = "keel_session";

/** Options of {@link startWorker}: an agent's options (model, tools, limits, …) and the PostgreSQL store. */
export interface WorkerOptions extends Omit<AgentOptions, "store" | "lease"> {
  store: PostgresSessionStore;
  /** Sessions run at once by this process (default 4). */
  concurrency?: number;
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
 * Runs sessions that have unconsumed inputs and no live owner (DESIGN §12), dispatched by
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
  const s = store.schema;
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
  const agent = createAgent({
    ...options,
    store,
    lease: {
      owner: options.owner ?? defaultLeaseOwner(),
      ttlMs: options.leaseTtlMs ?? 10_000,
      pollMs: options.pollMs ?? 1000,
    },
  });
  const running = new Map<string, Session>();
  let stopping = false;
  const key = (sessionId: string) => `keel:${s.replaceAll('"', "")}:${sessionId}`;
  const addJob = `graphile_worker.add_job($1, json_build_object('sessionId', $2::text), job_key := $3, job_key_mode := 'replace', max_attempts := 100)`;
  const enqueue = (sessionId: string) =>
    store.pool.query(`SELECT ${addJob}`, [SESSION_TASK, sessionId, key(sessionId)]);
  /** Enqueues the session if it needs a runner now (what the sweep looks for, for one session). */
  const enqueueIfNeeded = (sessionId: string) =>
    store.pool.query(
      `SELECT ${addJob}
       WHERE (EXISTS (SELECT 1 FROM ${s}.inbox WHERE session_id = $2 AND NOT taken)
           OR EXISTS (SELECT 1 FROM ${s}.leases WHERE session_id = $2
                AND ((released AND pending) OR (NOT released AND expires_at <= clock_timestamp()))))
         AND NOT EXISTS (SELECT 1 FROM ${s}.leases WHERE session_id = $2
                AND NOT released AND expires_at > clock_timestamp())`,
      [SESSION_TASK, sessionId, key(sessionId)],
    );

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
      if (!stopping) await enqueueIfNeeded(sessionId).catch(() => {});
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

  const sweep = setInterval(() => {
    if (stopping) return;
    store
      .sessionsNeedingRunner(100)
      .then((ids) => Promise.all(ids.filter((id) => !running.has(id)).map(enqueue)))
      .catch(() => {});
  }, options.sweepMs ?? 2000);
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
      await Promise.race([
        idle,
        new Promise((r) => setTimeout(r, options.shutdownGraceMs ?? 10_000)),
      ]);
      await agent.close(); // interrupts what still runs, settles, flushes, releases leases
      await runner.stop();
    },
  };
}
