import type { ChatMessage } from "../contracts/chat.ts";
import { systemClock } from "../contracts/clock.ts";
import type { LogEntry } from "./entries.ts";
import { SessionLog } from "./log.ts";
import type { SessionStore } from "./store.ts";

/** A stored session as its log holds it: what `keel show` prints. */
export interface StoredSession {
  sessionId: string;
  /** The active leaf: the last entry of the branch the session continues from (null: empty). */
  leafId: string | null;
  /** Every entry of the log, all branches, in `seq` order. */
  entries: readonly LogEntry[];
  /** The projection of the active branch: what the model would be sent next. */
  messages: readonly ChatMessage[];
  /** The instructions in force on the active branch (its last `settings` entry), if any. */
  instructions: string | undefined;
}

/**
 * Reads a stored session without running it: no recovery, no inbox, nothing written (a session
 * the store does not know reads as empty). For a UI, an export or a look at a session another
 * process is running.
 */
export async function readSession(store: SessionStore, sessionId: string): Promise<StoredSession> {
  const log = await SessionLog.open({
    sessionId,
    store,
    clock: systemClock,
    ids: () => {
      throw new Error("readSession: a session read this way is never appended to");
    },
    checkpoints: false,
  });
  // Opened from a checkpoint, the log holds only the entries after it: read the rest too.
  await log.loadHistory();
  const { instructions } = log.settings();
  return {
    sessionId,
    leafId: log.leafId,
    entries: log.entries(),
    messages: log.messages(),
    instructions: typeof instructions === "string" ? instructions : undefined,
  };
}
