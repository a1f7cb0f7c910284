import { builtinTools, createAgent, memoryStore, type Session, sandboxSupport } from "../index.ts";
import { terminalAsk, withApproval } from "./approval.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { openInspector } from "./inspect.ts";
import { workspaceInstructions } from "./instructions.ts";
import { connectMcp, type McpOptions, mcpServersOf } from "./mcp.ts";
import { outputClosed } from "./output.ts";
import { modelFor, providerName } from "./provider.ts";
import { loadSession } from "./sessions.ts";
import { openStore, shownStore, storeChoice } from "./store.ts";
import { createTrace } from "./trace.ts";

export interface RunOptions extends McpOptions {
  json?: boolean;
  /** Allow high-risk tools without asking. */
  yes?: boolean;
  inspect?: boolean;
  /** With `inspect`: keep the inspector open after the turn until Ctrl-C, even off a terminal. */
  keepOpen?: boolean;
  store?: string;
  maxSteps?: number;
  /** Continue this session instead of starting one. */
  resume?: string;
  /** `--provider`; default `KEEL_PROVIDER`, else openai-compatible. */
  provider?: string;
  /** The inspector's port (`--port`, implies `--inspect`); absent: a free one. */
  port?: number;
}

/**
 * The text of an inbox event of `session` (for the trace's steer line): still queued, or
 * already in the log. Never throws.
 */
export function inboxTextIn(session: Session | undefined, inboxId: string): string | undefined {
  try {
    const queued = session?.queued().find((e) => e.id === inboxId);
    if (queued) return queued.body;
    const entries = session?.entries() ?? [];
    for (let i = entries.length - 1; i >= 0; i--) {
      const e = entries[i];
      if (e.type === "inbox" && e.inboxId === inboxId) return e.body;
    }
  } catch {
    // Not open yet, or closed: the line goes without its text.
  }
  return undefined;
}

/** The model from the environment; a config error naming the variable when it is missing. */
export function modelFromEnv(env: NodeJS.ProcessEnv = process.env, provider?: string) {
  return modelFor(providerName(provider ?? (env.KEEL_PROVIDER || undefined)), env);
}

/**
 * `keel run "<prompt>"` and `keel resume <id> "<prompt>"`: one turn with the built-in tools on
 * the current directory, and the tools of the MCP servers the options name, logged to the
 * project's store. High-risk tools ask y/n on the
 * terminal; without one they are denied unless `--yes`. Ctrl-C interrupts the turn (a second
 * Ctrl-C exits at once).
 */
export async function runPrompt(prompt: string, options: RunOptions): Promise<ExitCode> {
  if (!prompt.trim()) throw new CliError('the prompt is empty: keel run "what to do"', EXIT.usage);
  if (options.resume) await loadSession(options.resume, options.store);
  const model = modelFromEnv(process.env, options.provider);
  const servers = mcpServersOf(options);
  const choice = storeChoice(options.store);
  const kept = choice.kind !== "memory";
  const store = kept ? (await openStore(choice, { create: true }))! : memoryStore();
  let current: Session | undefined;
  const trace = createTrace({
    out: process.stdout,
    json: options.json,
    inboxText: (id) => inboxTextIn(current, id),
  });
  const interactive = Boolean(process.stdin.isTTY && process.stderr.isTTY);
  const terminal = terminalAsk(process.stdin, process.stderr);
  // The store is out of the tools' reach wherever it is: .keel/ always, a --store file and
  // its SQLite companions by name.
  const protect =
    choice.kind === "sqlite"
      ? ["", "-wal", "-shm", "-journal"].map((suffix) => choice.path + suffix)
      : [];
  const builtins = builtinTools({ root: process.cwd(), protect });
  // MCP servers start before the turn; their tools go through the same approval as the built-ins.
  const mcp = await connectMcp(servers, builtins, (message) =>
    process.stderr.write(`keel: ${message}\n`),
  );
  // Without a sandbox, `shell` runs with the user's rights: said once, asked before every call.
  const sandbox = sandboxSupport();
  if (!sandbox.ok)
    process.stderr.write(
      `keel: shell commands are not sandboxed (${sandbox.reason}); each one is asked before it runs. Install bubblewrap to sandbox them.\n`,
    );
  const tools = withApproval([...builtins, ...mcp.tools], {
    yes: options.yes,
    ...(sandbox.ok ? {} : { askAlways: { tools: ["shell"], why: "shell is not sandboxed here" } }),
    ...(interactive
      ? {
          ask: async (question: string, signal: AbortSignal) => {
            trace.pause(true);
            try {
              return await terminal(question, signal);
            } finally {
              trace.pause(false);
            }
          },
        }
      : {}),
  });
  let inspector: Awaited<ReturnType<typeof openInspector>> | undefined;
  try {
    inspector = options.inspect || options.port ? await openInspector(options.port) : undefined;
  } catch (error) {
    await store.close();
    throw error;
  }
  const keepOpen = Boolean(options.keepOpen || process.stdout.isTTY);
  let closing = `inspector closed: the turn ended (keel ${options.resume ? "resume" : "run"} --inspect --keep-open keeps it open until Ctrl-C)`;
  const agent = createAgent({
    model,
    tools,
    instructions: workspaceInstructions(process.cwd(), tools),
    store,
    // High-risk calls are asked about by `withApproval` (or allowed by --yes): the agent's rule
    // for an embedder that configured nothing (refuse them) is not this command's.
    permissions: { defaults: { high: "allow" } },
    ...(options.maxSteps ? { limits: { maxSteps: options.maxSteps } } : {}),
    ...(inspector ? { inspect: inspector.sink } : {}),
  });
  let interrupted = false;
  const session = agent.session(options.resume);
  current = session;
  const onSigint = () => {
    if (interrupted) process.exit(EXIT.interrupted);
    interrupted = true;
    // The turn is cancelled at once; a store that cannot record the interrupt shows at exit.
    session.interrupt("interrupted by the user (Ctrl-C)").catch(() => {});
  };
  process.on("SIGINT", onSigint);
  const onOutputClosed = () => session.interrupt("stdout was closed by its reader");
  outputClosed.signal.addEventListener("abort", onOutputClosed, { once: true });
  try {
    await session.ready;
    if (inspector) trace.line(`inspector: ${inspector.url}`);
    session.subscribe(trace.onEvent);
    const result = await session.prompt(prompt);
    trace.finish({ type: "result", sessionId: session.id, ...result });
    if (!options.json) {
      process.stderr.write(
        kept
          ? `session ${session.id} · continue with: keel resume ${session.id}${options.store ? ` --store ${shownStore(choice)}` : ""} "…"\n`
          : `session ${session.id} · not kept (--store memory)\n`,
      );
    }
    if (interrupted) return EXIT.interrupted;
    // demo's rule: on a terminal (or with --keep-open) the page stays until Ctrl-C; off a
    // terminal (a script, CI) the command ends with its turn and says the page closed.
    if (inspector && keepOpen && !outputClosed.signal.aborted) {
      process.off("SIGINT", onSigint);
      process.stderr.write(`inspector still open at ${inspector.url} — Ctrl-C to exit\n`);
      await new Promise((resolve) => process.once("SIGINT", resolve));
      closing = "inspector closed";
    }
    return result.status === "completed" ? EXIT.ok : EXIT.turnFailed;
  } finally {
    outputClosed.signal.removeEventListener("abort", onOutputClosed);
    process.off("SIGINT", onSigint);
    await agent.close();
    await Promise.all(mcp.sets.map((s) => s.close()));
    await store.close();
    await inspector?.close();
    if (inspector && !options.json) process.stderr.write(`${closing}\n`);
  }
}
