import type pg from "pg";
import type { LogEntry } from "../entries.ts";
import type { AppendOptions } from "../store.ts";
import { checkBatch, fenced, StoreError } from "../store-error.ts";
import { type CommitOutcome, GroupCommit } from "./group-commit.ts";
import { asStoreError } from "./postgres-errors.ts";
import { FENCED_STATE, SEQ_STATE } from "./postgres-schema.ts";

/**
 * The write path of a PostgreSQL store: its appends, batched by group commit into one statement
 * per round trip (`append_entries` alone, `append_group` together; both in postgres-schema.ts),
 * and each refusal the server reports turned back into the error that append alone would get.
 * Apart from postgres-store.ts because it is the one part of the store that batches across
 * sessions; the store's other methods are one query each.
 */

/** One `append` call waiting for its group. */
export interface AppendRequest {
  sessionId: string;
  entries: readonly LogEntry[];
  options: AppendOptions;
}

/**
 * The group committer of the store on `pool` whose schema is `s` (quoted; `name` unquoted, for
 * its prepared statements' names), `where` naming the server in errors.
 */
export function postgresCommitter(
  pool: pg.Pool,
  s: string,
  name: string,
  where: string,
): GroupCommit<AppendRequest> {
  /** One append in one statement (`append_entries`); rejects with what refused it. */
  const appendOne = async ({ sessionId, entries, options: opts }: AppendRequest) => {
    try {
      await pool.query({
        name: `keel_append_${name}`,
        text: `SELECT ${s}.append_entries($1, $2, $3, $4::bigint[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::text[])`,
        values: [
          sessionId,
          opts.lease !== undefined,
          opts.lease?.token ?? 0,
          entries.map((e) => e.seq),
          entries.map((e) => e.id),
          entries.map((e) => e.parentId),
          entries.map((e) => e.type),
          entries.map((e) => e.at),
          entries.map((e) => JSON.stringify(e)),
        ],
      });
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === FENCED_STATE)
        throw fenced(sessionId, `postgres store ${where}`, opts.lease?.token);
      if (code === SEQ_STATE) {
        const last = Number((error as { message?: string }).message);
        throw checkBatch(sessionId, last, entries) ?? error;
      }
      throw asStoreError(error, where, "append");
    }
  };
  /** Several sessions' appends in one statement (`append_group`): one verdict each. */
  const appendGroup = async (group: readonly AppendRequest[]): Promise<CommitOutcome[]> => {
    const start: number[] = [];
    const of: number[] = [];
    const cols = { seq: [] as number[], id: [] as string[], parent: [] as (string | null)[] };
    const more = { type: [] as string[], at: [] as number[], body: [] as string[] };
    group.forEach((req, i) => {
      start.push(of.length + 1);
      for (const e of req.entries) {
        of.push(i + 1);
        cols.seq.push(e.seq);
        cols.id.push(e.id);
        cols.parent.push(e.parentId);
        more.type.push(e.type);
        more.at.push(e.at);
        more.body.push(JSON.stringify(e));
      }
    });
    const r = await pool.query<{ verdicts: (string | null)[] }>({
      name: `keel_append_group_${name}`,
      text: `SELECT ${s}.append_group($1::text[], $2::boolean[], $3::bigint[], $4::int[], $5::int[], $6::bigint[], $7::text[], $8::text[], $9::text[], $10::float8[], $11::text[]) AS verdicts`,
      values: [
        group.map((req) => req.sessionId),
        group.map((req) => req.options.lease !== undefined),
        group.map((req) => req.options.lease?.token ?? 0),
        start,
        of,
        cols.seq,
        cols.id,
        cols.parent,
        more.type,
        more.at,
        more.body,
      ],
    });
    const verdicts = r.rows[0].verdicts;
    return group.map((req, i) => refusal(req, verdicts[i]));
  };
  const refusal = (req: AppendRequest, verdict: string | null): CommitOutcome => {
    if (verdict === null) return undefined;
    const { sessionId, entries } = req;
    if (verdict === "fenced")
      return fenced(sessionId, `postgres store ${where}`, req.options.lease?.token);
    if (verdict.startsWith("seq:")) {
      const last = Number(verdict.slice(4));
      return (
        checkBatch(sessionId, last, entries) ??
        new StoreError("SEQ_CONFLICT", `session ${sessionId}: stored seq ${last} (${verdict})`)
      );
    }
    return new StoreError(
      "DUPLICATE_ID",
      `postgres store ${where}: append: session ${sessionId}: an entry with id ${verdict.slice(4)} is already stored`,
    );
  };
  /**
   * Commits a group. Alone: `append_entries`, as a lone append always went. Together: one
   * `append_group`; should the statement fail as a whole (a unique violation or deadlock raced
   * with another process's writer of the same unleased session, after its checks passed), the
   * group wrote nothing and each append is retried alone, so only the one that conflicts fails.
   */
  const commitGroup = async (group: readonly AppendRequest[]): Promise<CommitOutcome[]> => {
    const alone = (req: AppendRequest) =>
      appendOne(req).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
    if (group.length === 1) return [await alone(group[0])];
    try {
      return await appendGroup(group);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== "23505" && code !== "40P01") throw asStoreError(error, where, "append");
      const outcomes: CommitOutcome[] = [];
      for (const req of group) outcomes.push(await alone(req));
      return outcomes;
    }
  };
  return new GroupCommit<AppendRequest>({
    start: "microtask",
    key: (req) => req.sessionId,
    commit: commitGroup,
  });
}
