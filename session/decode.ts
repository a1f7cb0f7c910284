// Decoding what a store reads back: one entry body or one checkpoint body (JSON text) into the
// typed value, through the upgrades of older shapes and the schemas of session/entry-schema.ts
// (compiled into a plain check, session/schema-check.ts; zod runs only to explain a failure).
// Every store decodes here, so a damaged, unknown or newer entry is a `StoreError` at load that
// names the session and the seq, never a cast that fails later somewhere else.
//
// Changelog of the log schema (`LOG_SCHEMA_VERSION`, session/entries.ts), one line a version:
// 1: OpenAI Chat messages, entries without `writer`.
// 2: tool calls as Chat `toolCalls`, assistant `text`; SQLite file version 2.
// 3: neutral content parts (reasoning, text, `tool-call`), user image `parts`; `writer` records
//    which Keel wrote a session.
import { z } from "zod";
import { KEEL_VERSION } from "../contracts/version.ts";
import type { LogCheckpoint } from "./checkpoint.ts";
import { type EntryWriter, LOG_SCHEMA_VERSION, type LogEntry } from "./entries.ts";
import {
  callStartedSchema,
  compactionSchema,
  ENTRY_TYPES,
  logEntrySchema,
  messageSchema,
  userPartSchema,
  writerSchema,
} from "./entry-schema.ts";
import { guardOf } from "./schema-check.ts";
import { StoreError } from "./store-error.ts";
import { upgradeEntryV2 } from "./upgrade-entry.ts";

/** This Keel as a log's writer: what it stamps, and what a stored writer is compared with. */
export const THIS_WRITER: Readonly<EntryWriter> = Object.freeze({
  keel: KEEL_VERSION,
  schema: LOG_SCHEMA_VERSION,
});

/** Whether two writers are the same Keel version and log schema. This is a pure function. */
export function sameWriter(a: EntryWriter | null, b: EntryWriter): boolean {
  return a !== null && a.keel === b.keel && a.schema === b.schema;
}

/** Where a body was read: the store (e.g. `sqlite store .keel/keel.db`) and the session. */
export interface DecodeSite {
  store: string;
  sessionId: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const isWriter = guardOf(writerSchema);

/** What is wrong with a stored `writer`: a newer log schema than this Keel's; null: nothing. */
function newerWriter(writer: unknown): string | null {
  if (!isWriter(writer) || writer.schema <= LOG_SCHEMA_VERSION) return null;
  return `it was written by Keel ${writer.keel} in log schema ${writer.schema}; this Keel (${KEEL_VERSION}) reads log schema ${LOG_SCHEMA_VERSION} and older: upgrade Keel to ${writer.keel} or later to open this session`;
}

/** The first problem zod found, as `path: message`. */
function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  const path = issue.path.length > 0 ? issue.path.join(".") : "(entry)";
  return `${path}: ${issue.message}`;
}

/** `logEntrySchema`, compiled (session/schema-check.ts). */
const isLogEntry = guardOf(logEntrySchema);

/** Why a stored value is not an entry this Keel reads: `code` says whether an upgrade helps. */
export interface EntryProblem {
  ok: false;
  code: "CORRUPT" | "NEWER_SCHEMA";
  problem: string;
}

/**
 * The entry `value` holds (older shapes upgraded first), or what is wrong with it. `seq`: the
 * seq the store keeps it under, checked against the entry's own. This is a pure function.
 */
export function checkEntry(
  value: unknown,
  seq?: number,
): { ok: true; entry: LogEntry } | EntryProblem {
  const corrupt = (problem: string): EntryProblem => ({ ok: false, code: "CORRUPT", problem });
  if (!isRecord(value)) return corrupt("not a JSON object");
  const newer = newerWriter(value.writer);
  if (newer) return { ok: false, code: "NEWER_SCHEMA", problem: newer };
  if (typeof value.type !== "string" || !ENTRY_TYPES.has(value.type)) {
    return corrupt(
      `unknown entry type ${JSON.stringify(value.type)} (not one of log schema ${LOG_SCHEMA_VERSION}'s; a newer Keel's? upgrade Keel to read it)`,
    );
  }
  const candidate = upgradeEntryV2(value) ?? value;
  // The compiled check accepts what the schema does; zod runs only to say what is wrong.
  if (!isLogEntry(candidate)) {
    const parsed = logEntrySchema.safeParse(candidate);
    return corrupt(parsed.success ? "rejected by the compiled check" : firstIssue(parsed.error));
  }
  if (seq !== undefined && candidate.seq !== seq) {
    return corrupt(`its body says seq ${candidate.seq}, stored under seq ${seq}`);
  }
  return { ok: true, entry: candidate };
}

const entrySite = (site: DecodeSite, seq: number) =>
  `${site.store}: session ${site.sessionId}, entry seq ${seq}`;

/**
 * The entry stored as `body` under `seq`: parsed, upgraded from an older schema, validated.
 * Throws a `StoreError` naming the store, session and seq: `CORRUPT` (not JSON, an unknown
 * type, a field missing or of the wrong type, the seq not the stored one) or `NEWER_SCHEMA`
 * (a newer Keel wrote it: upgrade).
 */
export function decodeEntry(body: string, seq: number, site: DecodeSite): LogEntry {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    throw new StoreError(
      "CORRUPT",
      `${entrySite(site, seq)} is not JSON (${(error as Error).message}): the stored entry is damaged`,
      { cause: error },
    );
  }
  // The common case, with nothing allocated: a current entry under its own seq.
  const candidate = isRecord(value) ? (upgradeEntryV2(value) ?? value) : value;
  if (
    isLogEntry(candidate) &&
    candidate.seq === seq &&
    (candidate.writer === undefined || candidate.writer.schema <= LOG_SCHEMA_VERSION)
  ) {
    return candidate;
  }
  const checked = checkEntry(value, seq);
  if (checked.ok) return checked.entry;
  throw new StoreError(
    checked.code,
    checked.code === "NEWER_SCHEMA"
      ? `${entrySite(site, seq)}: ${checked.problem}`
      : `${entrySite(site, seq)} is not a log entry this Keel can read: ${checked.problem}`,
  );
}

/** The JSON object in `body`, or null (not JSON, or not an object). This is a pure function. */
export function parseObject(body: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(body);
    return isRecord(value) ? value : null;
  } catch {
    return null;
  }
}

/**
 * The string field `key` of the JSON object in `body`, or undefined (not JSON, not an object,
 * no such string). For reads that must work on a damaged entry too (deleting a session).
 * This is a pure function.
 */
export function storedString(body: string, key: string): string | undefined {
  const field = parseObject(body)?.[key];
  return typeof field === "string" ? field : undefined;
}

/** Decodes `[seq, body]` rows in order (see {@link decodeEntry}). */
export function decodeEntries(
  rows: readonly (readonly [number, string])[],
  site: DecodeSite,
): LogEntry[] {
  const out = new Array<LogEntry>(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = decodeEntry(rows[i][1], rows[i][0], site);
  return out;
}

const inboxSnapshotSchema = z.object({
  queue: z.array(
    z.object({
      id: z.string(),
      source: z.enum(["user", "tool", "job", "system"]),
      lane: z.enum(["interrupt", "next-step", "next-turn"]),
      body: z.string(),
      parts: z.array(userPartSchema).optional(),
      seq: z.number(),
    }),
  ),
  ids: z.array(z.string()),
});

/** A checkpoint of the current format (`v: 1`, projection `v: 3`). */
const checkpointSchema = z.object({
  v: z.literal(1),
  seq: z.number(),
  leafId: z.string().nullable(),
  projection: z.object({
    v: z.literal(3),
    messages: z.array(messageSchema),
    sources: z.array(z.string()),
    settings: z.record(z.string(), z.unknown()),
    baseline: compactionSchema.nullable(),
    pending: z.array(z.tuple([z.string(), z.array(z.number())])),
    projectedAttempts: z.array(z.string()),
    failedAttempts: z.array(z.string()),
    openCalls: z.array(callStartedSchema),
    openAttempts: z.array(
      z.tuple([z.string(), z.object({ turnId: z.string(), committed: z.boolean() })]),
    ),
    openTurn: z.string().nullable(),
    lastAsk: z
      .object({
        calls: z.array(z.object({ callId: z.string(), name: z.string() })),
        started: z.array(z.string()),
        answered: z.array(z.string()),
      })
      .nullable(),
  }),
  inbox: inboxSnapshotSchema.optional(),
  writer: writerSchema.optional(),
});

/** `checkpointSchema`, compiled: a checkpoint holds the whole projection, so no copy of it. */
const isCheckpoint = guardOf<LogCheckpoint>(checkpointSchema);

/**
 * The checkpoint in `body`, or null when it is not one of this format (an older Keel's, or
 * damaged: a checkpoint is derived from the entries, so `open` then replays them instead).
 * Throws a `StoreError` `NEWER_SCHEMA` when a newer Keel wrote the session (its `writer`).
 */
export function decodeCheckpoint(body: string, site: DecodeSite): LogCheckpoint | null {
  const value = parseObject(body);
  if (!value) return null;
  const newer = newerWriter(value.writer);
  if (newer)
    throw new StoreError("NEWER_SCHEMA", `${site.store}: session ${site.sessionId}: ${newer}`);
  return isCheckpoint(value) ? value : null;
}
