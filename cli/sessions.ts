import { type LogEntry, readSession } from "../index.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { renderProjection, renderTree } from "./show-format.ts";
import { openStore, refuseMemoryStore, shownStore, storeChoice } from "./store.ts";

export interface ListOptions {
  json?: boolean;
  store?: string;
}

const when = (ms: number) => new Date(ms).toISOString().replace("T", " ").slice(0, 19);

/** `keel sessions`: the sessions of the project's store, most recent first. */
export async function listSessions(options: ListOptions, out = process.stdout): Promise<ExitCode> {
  const choice = storeChoice(options.store);
  if (choice.kind === "memory") {
    out.write(
      options.json ? "[]\n" : "no sessions: --store memory keeps nothing between commands\n",
    );
    return EXIT.ok;
  }
  const store = await openStore(choice, { create: false, readOnly: true });
  if (!store) {
    out.write(
      options.json
        ? "[]\n"
        : `no sessions yet (no store at ${shownStore(choice)}; \`keel run\` creates it)\n`,
    );
    return EXIT.ok;
  }
  try {
    const sessions = (await store.list()).sort((a, b) => b.updatedAt - a.updatedAt);
    if (options.json) {
      out.write(`${JSON.stringify(sessions)}\n`);
      return EXIT.ok;
    }
    if (sessions.length === 0) {
      out.write(`no sessions in ${shownStore(choice)}\n`);
      return EXIT.ok;
    }
    const width = Math.max(10, ...sessions.map((s) => s.sessionId.length));
    out.write(`${"SESSION".padEnd(width)}  ENTRIES  UPDATED (UTC)        CREATED (UTC)\n`);
    for (const s of sessions) {
      out.write(
        `${s.sessionId.padEnd(width)}  ${String(s.entries).padStart(7)}  ${when(s.updatedAt)}  ${when(s.createdAt)}\n`,
      );
    }
    return EXIT.ok;
  } finally {
    await store.close();
  }
}

/** Loads a session's entries, or fails with "not found" naming the fix. */
export async function loadSession(id: string, storeOption?: string): Promise<LogEntry[]> {
  const store = await openForReading(id, storeOption);
  try {
    return await loaded(id, storeOption, store);
  } finally {
    await store.close();
  }
}

/** The store a stored session is read from, read-only; "not found" when there is none. */
async function openForReading(id: string, storeOption: string | undefined) {
  refuseMemoryStore(storeOption, `no session "${id}" to read`);
  const choice = storeChoice(storeOption);
  if (choice.kind === "memory") throw new Error("unreachable: refused above");
  const store = await openStore(choice, { create: false, readOnly: true });
  if (!store) throw notFound(id, storeOption);
  return store;
}

function notFound(id: string, storeOption: string | undefined): CliError {
  return new CliError(
    `no session "${id}" in ${shownStore(storeChoice(storeOption))} (list them with \`keel sessions\`)`,
    EXIT.notFound,
  );
}

async function loaded(
  id: string,
  storeOption: string | undefined,
  store: { load(id: string): Promise<LogEntry[]> },
): Promise<LogEntry[]> {
  const entries = await store.load(id);
  if (entries.length === 0) throw notFound(id, storeOption);
  return entries;
}

/** `keel show <id>`: the branch tree of the log and the projection the model would see. */
export async function showSession(
  id: string,
  options: ListOptions,
  out = process.stdout,
): Promise<ExitCode> {
  const store = await openForReading(id, options.store);
  try {
    await loaded(id, options.store, store);
    const { entries, messages, leafId, instructions } = await readSession(store, id);
    if (options.json) {
      out.write(`${JSON.stringify({ sessionId: id, leafId, instructions, entries, messages })}\n`);
      return EXIT.ok;
    }
    out.write(`session ${id} · ${entries.length} entries · leaf ${leafId ?? "(root)"}\n\n`);
    out.write(`${renderTree(entries, leafId)}\n\n`);
    out.write(
      typeof instructions === "string"
        ? `instructions (sent before the tools and the history):\n${indent(instructions)}\n\n`
        : "instructions: none\n\n",
    );
    out.write(`projection (what the model sees next, ${messages.length} messages):\n`);
    out.write(`${renderProjection(messages)}\n`);
    return EXIT.ok;
  } finally {
    await store.close();
  }
}

const indent = (text: string) =>
  text
    .split("\n")
    .map((l) => `  ${l}`)
    .join("\n");
