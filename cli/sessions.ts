import { type LogEntry, readSession } from "../index.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { renderProjection, renderTree } from "./show-format.ts";
import { MEMORY_STORE, openStore, refuseMemoryStore, shown, storePath } from "./store.ts";

export interface ListOptions {
  json?: boolean;
  store?: string;
}

const when = (ms: number) => new Date(ms).toISOString().replace("T", " ").slice(0, 19);

/** `keel sessions`: the sessions of the project's store, most recent first. */
export async function listSessions(options: ListOptions, out = process.stdout): Promise<ExitCode> {
  if (options.store === MEMORY_STORE) {
    out.write(
      options.json ? "[]\n" : "no sessions: --store memory keeps nothing between commands\n",
    );
    return EXIT.ok;
  }
  const path = storePath(options.store);
  const store = openStore(path, false);
  if (!store) {
    out.write(
      options.json
        ? "[]\n"
        : `no sessions yet (no store at ${shown(path)}; \`keel run\` creates it)\n`,
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
      out.write(`no sessions in ${shown(path)}\n`);
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
  refuseMemoryStore(storeOption, `no session "${id}" to read`);
  const path = storePath(storeOption);
  const store = openStore(path, false);
  const missing = new CliError(
    `no session "${id}" in ${shown(path)} (list them with \`keel sessions\`)`,
    EXIT.notFound,
  );
  if (!store) throw missing;
  try {
    const entries = await store.load(id);
    if (entries.length === 0) throw missing;
    return entries;
  } finally {
    await store.close();
  }
}

/** `keel show <id>`: the branch tree of the log and the projection the model would see. */
export async function showSession(
  id: string,
  options: ListOptions,
  out = process.stdout,
): Promise<ExitCode> {
  const path = storePath(options.store);
  await loadSession(id, options.store);
  const store = openStore(path, false)!;
  try {
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
