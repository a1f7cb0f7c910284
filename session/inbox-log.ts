import { consume, emptyInbox, type Inbox, receive } from "../machines/policies/inbox.ts";
import type { LogEntry } from "./entries.ts";

/**
 * Rebuilds the inbox after a restart from the log, in log order: every `inbox` entry is
 * received (with the entry's `seq`), every `inbox_consumed` entry consumes its id. Events that
 * were received but not consumed are queued again; consumed ones stay deduplicated.
 */
export function inboxFromEntries(entries: Iterable<LogEntry>): Inbox {
  let inbox = emptyInbox();
  for (const entry of entries) inbox = applyInboxEntry(inbox, entry);
  return inbox;
}

/**
 * One step of {@link inboxFromEntries}: `inbox` after `entry` (unchanged for entries that are
 * neither `inbox` nor `inbox_consumed`). This is a pure function.
 */
export function applyInboxEntry(inbox: Inbox, entry: LogEntry): Inbox {
  if (entry.type === "inbox") {
    const { inboxId: id, source, lane, body, parts, seq } = entry;
    return receive(
      inbox,
      parts ? { id, source, lane, body, parts, seq } : { id, source, lane, body, seq },
    ).inbox;
  }
  if (entry.type === "inbox_consumed") return consume(inbox, entry.inboxId);
  return inbox;
}
