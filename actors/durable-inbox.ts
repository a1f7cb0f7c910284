import type { Inbox } from "../machines/policies/inbox.ts";

/**
 * The inbox as the runner may take from it (invariant 15 of docs/architecture.md): an input runs
 * only once its own entry is durable, so an input whose write the store refuses — its caller
 * told so — is never taken, and leaves the log (or is consumed unrun, see `refusedInput`).
 * Interrupts stay: they run nothing. Pure; the same inbox when nothing is hidden.
 */
export function durableInbox(inbox: Inbox, durableSeq: number): Inbox {
  const last = inbox.queue[inbox.queue.length - 1];
  if (!last || last.seq <= durableSeq) return inbox;
  return {
    ...inbox,
    queue: inbox.queue.filter((e) => e.lane === "interrupt" || e.seq <= durableSeq),
  };
}

/**
 * What `SessionLog.append` is told for an input's entry: if the store refuses its write after
 * other entries were appended (it cannot leave the log), it is consumed unrun at once, as a
 * cleared input is, so it never runs.
 */
export function refusedInput(
  log: { append(input: { type: "inbox_consumed"; inboxId: string }): unknown },
  inboxId: string,
): { keep(): void } {
  return { keep: () => log.append({ type: "inbox_consumed", inboxId }) };
}
