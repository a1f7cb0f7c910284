import { hostname } from "node:os";
import {
  answerThroughStore,
  createIds,
  hasLeases,
  type PermissionReply,
  systemClock,
} from "../index.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { openStore, refuseMemoryStore, shownStore, storeChoice } from "./store.ts";

/** Options of `keel approve` and `keel deny`. */
export interface AnswerCommandOptions {
  store?: string;
  /** `keel approve --always`: allow the tool for the rest of the session. */
  always?: boolean;
  /** `keel deny --feedback <text>`: the call's result, and the turn goes on. */
  feedback?: string;
  /** How long to wait for the session's runner to apply the answer (ms). */
  wait?: number;
  json?: boolean;
}

/**
 * `keel approve <session> [request]` / `keel deny <session> [request] [--feedback …]`: answers a
 * pending permission request from outside the process that runs the session, with the rules of
 * `session.replyPermission` (docs/permissions.md): posted through the store, applied by the
 * session's owner (or, while no process holds the session, by this command under its lease,
 * leaving the turn to the next runner); the first answer wins.
 */
export async function answerCommand(
  kind: "approve" | "deny",
  sessionId: string,
  requestId: string | undefined,
  options: AnswerCommandOptions,
  out = process.stdout,
): Promise<ExitCode> {
  refuseMemoryStore(options.store, "no session to answer");
  const choice = storeChoice(options.store);
  if (choice.kind === "memory") return EXIT.usage; // refused just above
  if (kind === "approve" && options.feedback !== undefined) {
    throw new CliError("keel approve takes no --feedback (keel deny --feedback does)", EXIT.usage);
  }
  if (kind === "deny" && options.always) {
    throw new CliError("keel deny takes no --always (keel approve --always does)", EXIT.usage);
  }
  const store = await openStore(choice, { create: false });
  if (!store) {
    throw new CliError(`no store at ${shownStore(choice)}: no session to answer`, EXIT.notFound);
  }
  try {
    if (!hasLeases(store)) {
      throw new CliError(`the store ${shownStore(choice)} is not shared by processes`, EXIT.config);
    }
    const reply: PermissionReply =
      kind === "approve"
        ? { type: options.always ? "allow_always" : "allow_once" }
        : options.feedback !== undefined
          ? { type: "deny_with_feedback", feedback: options.feedback }
          : { type: "deny" };
    const answered = await answerThroughStore({
      store,
      sessionId,
      ...(requestId !== undefined ? { requestId } : {}),
      reply,
      owner: `${hostname()}:${process.pid}`,
      pollMs: 100,
      waitMs: options.wait ?? 30_000,
      clock: systemClock,
      ids: createIds(),
    });
    if (options.json) out.write(`${JSON.stringify(answered)}\n`);
    if (!answered.ok) {
      if (!options.json) process.stderr.write(`keel ${kind}: ${answered.message}\n`);
      return answered.code === "UNKNOWN_REQUEST" ? EXIT.notFound : EXIT.turnFailed;
    }
    if (!options.json) {
      const what = kind === "approve" ? (options.always ? "allowed always" : "approved") : "denied";
      out.write(`${what} ${answered.requestId} in session ${sessionId}\n`);
    }
    return EXIT.ok;
  } finally {
    await store.close();
  }
}
