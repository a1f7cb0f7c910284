import { type ChatMessage, toChatMessages } from "../../../contracts/chat.ts";
import type { SessionLog } from "../../../session/log.ts";
import { NO_RESULT_TEXT, Projection } from "../../../session/projection.ts";
import {
  type RecoverOptions,
  type RecoveryReport,
  recoverSession,
} from "../../../session/recovery.ts";

/** What the crash property runs: how messages are projected and how recovery decides. */
export interface RecoveryImpl {
  project: (log: SessionLog) => readonly ChatMessage[];
  recover: (log: SessionLog) => Promise<RecoveryReport>;
}

/** Broken on purpose (invariant 1 of docs/architecture.md): a missing result is not patched, leaving an orphan call. */
export const noPatch = (real: RecoveryImpl): RecoveryImpl => ({
  ...real,
  project: (log) => log.messages().filter((m) => m.role !== "tool" || m.content !== NO_RESULT_TEXT),
});

/** Broken on purpose (invariant 9 of docs/architecture.md): failed and interrupted attempts are projected. */
export const projectsFailedAttempts = (real: RecoveryImpl): RecoveryImpl => ({
  ...real,
  project: (log) =>
    toChatMessages(
      Projection.fromPath(
        log.path().filter((e) => !(e.type === "attempt_end" && e.status !== "completed")),
      ).messages,
    ),
});

/** Broken on purpose (invariant 8 of docs/architecture.md): every call with a start and no result is re-run. */
export const rerunsEverything = (real: RecoveryImpl): RecoveryImpl => ({
  ...real,
  recover: async (log) => {
    const report = await recoverSession(log, { isIdempotent: () => true });
    return {
      ...report,
      retry: [
        ...report.retry,
        ...report.plan.unknownCalls.filter((c) => !report.retry.includes(c)),
      ],
    };
  },
});

/**
 * Broken on purpose (invariant 8 of docs/architecture.md): trusts the tool's trait at recovery over the flag its start
 * record logged (`recovery.ts` without `call.idempotent &&`), so a call that started as
 * non-idempotent is re-run because its tool is idempotent now.
 */
export const trustsCurrentTrait = (
  real: RecoveryImpl,
  isIdempotent: RecoverOptions["isIdempotent"],
): RecoveryImpl => ({
  ...real,
  recover: async (log) => {
    const open = log.openWork().calls.map((c) => c.callId);
    const report = await recoverSession(log, { isIdempotent });
    const retried = new Set(report.retry.map((c) => c.callId));
    const extra = report.plan.unknownCalls.filter(
      (c) => !retried.has(c.callId) && open.includes(c.callId) && isIdempotent(c.name) === true,
    );
    return { ...report, retry: [...report.retry, ...extra] };
  },
});
