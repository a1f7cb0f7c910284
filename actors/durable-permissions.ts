// Permission requests that outlive the process (docs/crashes.md, docs/permissions.md): a
// request is a log entry from the moment it is asked, and an answer from any process reaches
// the one log that decides it. The owner of the session applies answers in the order it takes
// them (its log is the one order); a process without the lease posts its answer to the store's
// inbox and reads the log back to learn whether its answer was the first.

import { setTimeout as sleep } from "node:timers/promises";
import type { Clock } from "../contracts/clock.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import {
  type PermissionReply,
  type PermissionRequest,
  readPermissionReply,
} from "../contracts/permission.ts";
import { type Refusal, refuse } from "../contracts/refusal.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import { alwaysAllowedTools, decisionsFor, loggedRequests } from "../session/permission-log.ts";
import type { LeaseStore, PostedInput, SessionStore } from "../session/store.ts";
import type { Decided, PermissionBroker, PermissionEvent } from "./permissions.ts";
import { takeLease } from "./take-lease.ts";

/** The prefix of a posted answer's id (the inbox id of a permission reply). */
const ANSWER_PREFIX = "answer_";
const ANSWER_TYPE = "keel.permission.reply";

/** An answer to a permission request, as another process posted it. */
export interface PostedAnswer {
  answerId: string;
  requestId: string;
  reply: PermissionReply;
}

/** What answering a request from any process resolves to (see `answerThroughStore`). */
export type AnswerResult =
  | { ok: true; requestId: string }
  | Refusal<"UNKNOWN_REQUEST" | "ALREADY_DECIDED" | "ANSWER_PENDING">;

/**
 * Writes `request` to the log as a `permission_request` and makes it durable, before anyone is
 * asked. Resolves with its decision when the log holds one already (an answer written while it
 * was being persisted), else undefined. Rejects when the store refuses the write.
 */
export async function persistRequest(
  log: SessionLog,
  turnId: string,
  request: PermissionRequest,
): Promise<Decided | undefined> {
  await log.loadHistory();
  if (!loggedRequests(log.entries()).some((r) => r.request.requestId === request.requestId)) {
    log.append({
      type: "permission_request",
      turnId,
      requestId: request.requestId,
      callId: request.callId,
      tool: request.tool,
      args: request.args,
      risk: request.risk,
      ...(request.deadlineAt !== undefined ? { deadlineAt: request.deadlineAt } : {}),
    });
  }
  await log.flush();
  return decidedInLog(log.entries(), request.requestId);
}

/**
 * Gives `broker` the tools an `allow_always` answer allowed in the log, in any process and before
 * a restart, once per broker: before its first gate. Loads the log's history for it.
 */
export async function restoreAlways(
  broker: PermissionBroker | undefined,
  log: SessionLog,
): Promise<void> {
  if (!broker || broker.alwaysRestored) return;
  await log.loadHistory();
  broker.restoreAlways(alwaysAllowedTools(log.entries()));
}

/** The decision of `requestId` the entries hold, as the broker reports one (undefined: none). */
export function decidedInLog(entries: readonly LogEntry[], requestId: string): Decided | undefined {
  const logged = loggedRequests(entries).find((r) => r.request.requestId === requestId);
  const d = logged?.decision;
  if (!d) return undefined;
  return {
    decision: d.decision,
    source: d.source,
    ...(d.answerId ? { answerId: d.answerId } : {}),
  };
}

/** The `permission_decision` entry of a decided request of turn `turnId`. */
export function decisionEntry(
  turnId: string,
  event: Extract<PermissionEvent, { type: "permission.decided" }>,
  answerId: string | undefined,
): Omit<EntryOf<"permission_decision">, "id" | "parentId" | "seq" | "at"> {
  return {
    type: "permission_decision",
    turnId,
    requestId: event.requestId,
    callId: event.callId,
    tool: event.tool,
    decision: event.decision,
    source: event.source,
    ...(answerId !== undefined ? { answerId } : {}),
  };
}

/** The inbox input that carries an answer to the session's owner. */
export function answerInput(answer: PostedAnswer): PostedInput {
  return {
    id: answer.answerId,
    lane: "next-step",
    source: "user",
    body: JSON.stringify({ type: ANSWER_TYPE, requestId: answer.requestId, reply: answer.reply }),
  };
}

/** The answer a posted input carries, or undefined when it is an ordinary input. */
export function readAnswer(input: PostedInput): PostedAnswer | undefined {
  if (!input.id.startsWith(ANSWER_PREFIX)) return undefined;
  try {
    const body: unknown = JSON.parse(input.body);
    if (typeof body !== "object" || body === null) return undefined;
    const { type, requestId, reply: raw } = body as Record<string, unknown>;
    if (type !== ANSWER_TYPE || typeof requestId !== "string") return undefined;
    const reply = readPermissionReply(raw);
    return reply && { answerId: input.id, requestId, reply };
  } catch {
    return undefined;
  }
}

/**
 * Applies an answer this owner took (from the inbox, or its own `replyPermission`): to the
 * broker when a turn waits on the request there, else straight into the log (a request restored
 * from the log and not yet asked again: its turn reads the decision back). An answer to a
 * request decided already changes nothing: its process reads the earlier decision from the log.
 * Returns whether it decided the request.
 */
export function applyAnswer(
  log: SessionLog,
  broker: PermissionBroker | undefined,
  answer: Omit<PostedAnswer, "answerId"> & { answerId?: string },
): boolean {
  if (broker?.has(answer.requestId)) {
    return broker.reply(answer.requestId, answer.reply, answer.answerId);
  }
  if (broker?.decided(answer.requestId)) return false;
  const entries = decisionsFor(
    loggedRequests(log.entries()),
    answer.requestId,
    answer.reply,
    answer.answerId,
  );
  for (const entry of entries) {
    log.append(entry);
    const { decision, source, answerId } = entry;
    broker?.decidedEarly(entry.requestId, { decision, source, ...(answerId ? { answerId } : {}) });
  }
  return entries.length > 0;
}

/** Where `answerThroughStore` reads and writes. */
export interface AnswerOptions {
  store: SessionStore & LeaseStore;
  sessionId: string;
  /** The request to answer; undefined: the only one pending (refused when there are several). */
  requestId?: string;
  reply: PermissionReply;
  /** The lease owner's name, when this process may apply answers itself while no one runs the session. */
  owner?: string;
  ttlMs?: number;
  pollMs: number;
  /** How long to wait for a process to apply the answer (ms). */
  waitMs: number;
  clock: Clock;
  ids: IdGenerator;
}

/**
 * Answers a permission request from a process that does not run the session (a follower,
 * `keel approve`): refused at once when the log holds no such request or has decided it; else
 * posts the answer to the store's inbox (durable: a worker or the next process to open the
 * session applies it) and reads the log until the request is decided. With `owner`, while no live
 * process holds the session's lease, it takes the lease itself, applies the posted answers in
 * the order they were posted, and gives the lease back marked pending (a worker, or the next
 * process to open the session, continues the turn). Resolves ok when this answer decided the
 * request, `ALREADY_DECIDED` when an earlier one did, `ANSWER_PENDING` when no process applied
 * it within `waitMs` (it stays posted and is applied later, unless an earlier answer wins).
 */
export async function answerThroughStore(options: AnswerOptions): Promise<AnswerResult> {
  const { store, sessionId, pollMs } = options;
  const entries = await store.load(sessionId);
  const requests = loggedRequests(entries);
  const requestId = options.requestId ?? soleOpen(requests);
  if (typeof requestId !== "string") return requestId;
  const logged = requests.find((r) => r.request.requestId === requestId);
  if (!logged) {
    return refuse("UNKNOWN_REQUEST", `session ${sessionId} has no permission request ${requestId}`);
  }
  if (logged.decision) return alreadyDecided(sessionId, logged.decision);
  const answerId = `${ANSWER_PREFIX}${options.ids("ans")}`;
  await store.postInput(sessionId, answerInput({ answerId, requestId, reply: options.reply }));
  const until = Date.now() + options.waitMs;
  for (;;) {
    const decided = decidedInLog(await store.load(sessionId), requestId);
    if (decided) {
      if (decided.answerId === answerId) return { ok: true, requestId };
      return alreadyDecided(sessionId, { requestId, ...decided });
    }
    if (options.owner !== undefined) await applyUnderLease(options, options.owner);
    if (Date.now() >= until) {
      return refuse(
        "ANSWER_PENDING",
        `the answer to ${requestId} was recorded (${answerId}) but no process running session ${sessionId} applied it within ${options.waitMs} ms; it is applied when one does, unless an earlier answer decides the request first`,
      );
    }
    await sleep(pollMs);
  }
}

/**
 * While no live process holds the session: takes its lease, writes the decisions of the answers
 * posted so far (in posting order: the first answer wins), marks them taken and releases the
 * lease as pending, so the turn that waits on them is continued by the next runner.
 */
async function applyUnderLease(options: AnswerOptions, owner: string): Promise<void> {
  const { store, sessionId } = options;
  const lease = await takeLease(
    {
      store,
      owner,
      ttlMs: options.ttlMs ?? 10_000,
      pollMs: options.pollMs,
      onDoorbell: () => () => {},
    },
    sessionId,
  );
  if (!lease) return;
  try {
    const log = await SessionLog.open({ sessionId, store, clock: options.clock, ids: options.ids });
    log.fence(lease);
    const answers = (await store.postedInputs(sessionId))
      .map((input) => readAnswer(input))
      .filter((a): a is PostedAnswer => a !== undefined);
    for (const answer of answers) applyAnswer(log, undefined, answer);
    await log.flush();
    await store.markTaken(
      sessionId,
      answers.map((a) => a.answerId),
    );
  } finally {
    await store.releaseLease(lease, { pending: true });
  }
}

function soleOpen(
  requests: ReturnType<typeof loggedRequests>,
): string | Refusal<"UNKNOWN_REQUEST"> {
  const open = requests.filter((r) => !r.decision);
  if (open.length === 1) return open[0]!.request.requestId;
  if (open.length === 0) return refuse("UNKNOWN_REQUEST", "no permission request is pending");
  const ids = open.map((r) => `${r.request.requestId} (${r.request.tool})`).join(", ");
  return refuse("UNKNOWN_REQUEST", `several permission requests are pending; name one: ${ids}`);
}

function alreadyDecided(
  sessionId: string,
  d: { requestId: string; decision: Decided["decision"]; source: Decided["source"] },
): Refusal<"ALREADY_DECIDED"> {
  const how =
    d.source.type === "reply" || d.source.type === "spread"
      ? `by an earlier answer (${d.source.reply})`
      : d.source.type === "expired"
        ? "as denied: its deadline passed"
        : `by ${d.source.type.replace("_", " ")}`;
  return refuse(
    "ALREADY_DECIDED",
    `permission request ${d.requestId} of session ${sessionId} was decided already ${how} (${d.decision.type}); this answer changed nothing`,
  );
}
