import type pg from "pg";
import { NO_SPEND, type Spend } from "../contracts/budget.ts";
import { addSpend } from "../machines/policies/budget.ts";

/**
 * What an agent's processes spent together: `createAgent({ budget, sharedSpend })` adds each
 * charge to it and reads every process's spend from it (see {@link postgresAgentSpend}).
 */
export interface SharedSpend {
  /**
   * Adds `spent` to the shared total (in the background) and learns the total it makes.
   * Contract: synchronous, must not throw; a lost write is retried with the next charge.
   */
  charge(spent: Spend): void;
  /** Reads the shared total again (in the background). Contract: must not throw. */
  refresh(): void;
  /** What every process spent, as last learned, with this process's charges not yet written. */
  spent(): Spend;
  /** The exact shared total now (one statement). */
  read(): Promise<Spend>;
}

/** Options of {@link postgresAgentSpend}. */
export interface PostgresAgentSpendOptions {
  /** The shared budget's name: processes with one name share one total. */
  name: string;
  /** Schema of Keel's tables (default `keel`); the `agent_spend` table is created when missing. */
  schema?: string;
}

interface Row {
  steps: number;
  input_tokens: string;
  output_tokens: string;
  cost: number;
  time_ms: string;
}

const toSpend = (r: Row | undefined): Spend =>
  r
    ? {
        steps: Number(r.steps),
        inputTokens: Number(r.input_tokens),
        outputTokens: Number(r.output_tokens),
        cost: Number(r.cost),
        timeMs: Number(r.time_ms),
      }
    : NO_SPEND;

const negate = (s: Spend): Spend => ({
  steps: -s.steps,
  inputTokens: -s.inputTokens,
  outputTokens: -s.outputTokens,
  cost: -s.cost,
  timeMs: -s.timeMs,
});

/**
 * An agent's spend shared by every process on one database (docs/embedding.md, "Budgets"), as
 * the retry budget is (`postgresRetryBudget`): one row per name in `<schema>.agent_spend`, to
 * which each charge is added by one `INSERT … ON CONFLICT DO UPDATE … RETURNING` (row lock, no
 * read-modify-write race) that also returns the total every process made. The budget's checks
 * are synchronous (a request reserves before it is sent), so they read the total as last
 * learned plus this process's charges still being written; each reservation refreshes it in
 * the background. Another process's spend is thus seen within one of its charges.
 */
export function postgresAgentSpend(pool: pg.Pool, options: PostgresAgentSpendOptions): SharedSpend {
  if (typeof options?.name !== "string" || options.name === "") {
    throw new TypeError("postgresAgentSpend: name must be a non-empty string");
  }
  const s = `"${options.schema ?? "keel"}"`;
  const columns = "steps, input_tokens, output_tokens, cost, time_ms";
  let ready: Promise<unknown> | undefined;
  const ensure = () => {
    ready ??= pool
      .query(
        `CREATE TABLE IF NOT EXISTS ${s}.agent_spend (name text PRIMARY KEY, steps bigint NOT NULL, input_tokens bigint NOT NULL, output_tokens bigint NOT NULL, cost double precision NOT NULL, time_ms bigint NOT NULL)`,
      )
      .catch((err: unknown) => {
        // Another process created it at the same moment (IF NOT EXISTS races in the catalog).
        const code = (err as { code?: string }).code;
        if (code === "23505" || code === "42P07") return;
        ready = undefined;
        throw err;
      });
    return ready;
  };
  const addSql = `INSERT INTO ${s}.agent_spend AS a (name, ${columns}) VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (name) DO UPDATE SET steps = a.steps + $2, input_tokens = a.input_tokens + $3,
      output_tokens = a.output_tokens + $4, cost = a.cost + $5, time_ms = a.time_ms + $6
    RETURNING ${columns}`;
  let known: Spend = NO_SPEND;
  /** This process's charges being written (a failed write's stay, and go with the next). */
  let unwritten: Spend = NO_SPEND;
  let failed: Spend = NO_SPEND;
  const write = async (spent: Spend) => {
    await ensure();
    const r = await pool.query<Row>(addSql, [
      options.name,
      spent.steps,
      Math.round(spent.inputTokens),
      Math.round(spent.outputTokens),
      spent.cost,
      Math.round(spent.timeMs),
    ]);
    known = toSpend(r.rows[0]);
  };
  const read = async () => {
    await ensure();
    const r = await pool.query<Row>(`SELECT ${columns} FROM ${s}.agent_spend WHERE name = $1`, [
      options.name,
    ]);
    known = toSpend(r.rows[0]);
    return addSpend(known, unwritten);
  };
  return {
    charge(spent) {
      // Counted at once (the local view includes it); written in the background. A failed
      // write is charged again with the next charge, so nothing is lost while the pool recovers.
      unwritten = addSpend(unwritten, spent);
      const batch = addSpend(failed, spent);
      failed = NO_SPEND;
      write(batch).then(
        () => {
          unwritten = addSpend(unwritten, negate(batch));
        },
        () => {
          failed = addSpend(failed, batch);
        },
      );
    },
    refresh() {
      read().catch(() => {});
    },
    spent: () => addSpend(known, unwritten),
    read,
  };
}
