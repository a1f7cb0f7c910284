// `session.pendingPermissions()` and `session.replyPermission()`: read from the log, answered in
// the process that runs the session or through the store from any other (docs/permissions.md,
// docs/crashes.md).

import type { PermissionReply, PermissionRequest } from "../contracts/permission.ts";
import { refuse } from "../contracts/refusal.ts";
import type { LogEntry } from "../session/entries.ts";
import { loggedRequests, openRequests } from "../session/permission-log.ts";
import type { PostedInput } from "../session/store.ts";
import {
  type AnswerResult,
  answerThroughStore,
  applyAnswer,
  readAnswer,
} from "./durable-permissions.ts";
import type { SessionScope } from "./session-scope.ts";

/** How long a follower waits for the owner to apply its answer before it says so (ms). */
const FOLLOWER_WAIT_MS = 60_000;

/**
 * The permission requests of the session that wait for an answer, as its log holds them: the
 * owner's log in memory, or, in a follower or a sleeping session, the log as stored.
 */
export async function pendingPermissions(s: SessionScope): Promise<PermissionRequest[]> {
  await s.ready;
  return openRequests(await currentEntries(s), s.id);
}

/**
 * Answers a permission request (and, as the reply says, the other pending ones). In the process
 * that runs the session the answer is applied at once and made durable; in a follower it is
 * posted to the store and applied by the owner (`answerThroughStore`). The first answer to reach
 * the session's log wins; a later one is refused `ALREADY_DECIDED`.
 */
export async function replyPermission(
  s: SessionScope,
  requestId: string,
  reply: PermissionReply,
): Promise<{ ok: true } | Exclude<AnswerResult, { ok: true }>> {
  await s.ready;
  const lease = s.options.lease;
  if (s.follower && lease) {
    const answered = await answerThroughStore({
      store: lease.store,
      sessionId: s.id,
      requestId,
      reply,
      pollMs: Math.min(lease.pollMs, 250),
      waitMs: FOLLOWER_WAIT_MS,
      clock: { now: s.options.now, setTimeout, clearTimeout },
      ids: s.options.ids,
    });
    return answered.ok ? { ok: true } : answered;
  }
  const log = s.openLog("replyPermission");
  await log.loadHistory();
  const logged = loggedRequests(log.entries()).find((r) => r.request.requestId === requestId);
  if (!logged) {
    return refuse(
      "UNKNOWN_REQUEST",
      `no permission request ${requestId} was asked in session ${s.id}; see session.pendingPermissions()`,
    );
  }
  if (logged.decision) {
    return refuse(
      "ALREADY_DECIDED",
      `permission request ${requestId} of session ${s.id} was decided already (${logged.decision.decision.type}, by ${logged.decision.source.type}); this answer changed nothing`,
    );
  }
  applyAnswer(log, s.deps?.permissions, { requestId, reply });
  // The waiting turn appends its decision as its broker resolves (a microtask later).
  await new Promise((resolve) => setImmediate(resolve));
  await log.flush();
  return { ok: true };
}

/**
 * Applies an answer another process posted for this owner's session (returns false for an
 * ordinary input). An answer to a request decided already changes nothing.
 */
export async function takePostedAnswer(s: SessionScope, input: PostedInput): Promise<boolean> {
  const answer = readAnswer(input);
  if (!answer) return false;
  await s.log.loadHistory();
  applyAnswer(s.log, s.deps?.permissions, answer);
  return true;
}

async function currentEntries(s: SessionScope): Promise<readonly LogEntry[]> {
  const lease = s.options.lease;
  if ((s.follower || !s.awake) && lease) return lease.store.load(s.id);
  const log = s.openLog("pendingPermissions");
  await log.loadHistory();
  return log.entries();
}
