import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  builtinTools,
  createAgent,
  type Inspector,
  type Model,
  type ScriptStep,
  type Session,
  scriptedModel,
} from "../index.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { openInspector } from "./inspect.ts";
import { workspaceInstructions } from "./instructions.ts";
import { outputClosed } from "./output.ts";
import { inboxTextIn, modelFromEnv } from "./run.ts";
import { openStore, shownStore, storeChoice } from "./store.ts";
import { createTrace, type TraceOutput } from "./trace.ts";

export interface DemoOptions {
  /** One JSON event per line instead of the readable trace. */
  json?: boolean;
  /**
   * Serve the inspector while the demo runs (default true), and keep it open afterwards until
   * `keepOpen` resolves (by default: on a terminal or with `stayOpen`, until Ctrl-C; otherwise
   * not at all). The output says when it closes.
   */
  inspect?: boolean;
  /** Keep the inspector open until Ctrl-C even off a terminal (`--keep-open`). */
  stayOpen?: boolean;
  /** The inspector's port (`--port`); absent: a free one. */
  port?: number;
  /** The session store file (default `./.keel/keel.db`); "memory" keeps nothing. */
  store?: string;
  /**
   * Environment for the model choice (default `process.env`): OPENAI_* selects a real model,
   * unless `KEEL_DEMO_MODEL=scripted`.
   */
  env?: NodeJS.ProcessEnv;
  /** The scripted model even when OPENAI_* is set (`--scripted`). */
  scripted?: boolean;
  out?: TraceOutput;
  /**
   * Waits before closing the inspector (default: until SIGINT).
   * Contract: resolves when the inspector may close; must not reject.
   */
  keepOpen?: () => Promise<void>;
  /**
   * Called with the inspector's URL before the session starts (e.g. to open a browser).
   * Contract: the session starts when it resolves; must not reject.
   */
  onInspector?: (url: string) => Promise<void>;
}

const PROMPT = "Fix the typo in src/greet.ts, then tell me what this project contains.";
/** Sent while the first tool batch runs: it must land after the batch, before the next model call. */
const STEER = "Keep the fix minimal: change only the typo.";

const FILES: Record<string, string> = {
  "README.md": "# hello\n\nA tiny project that greets people.\n",
  "notes.txt": "todo: ship it\n",
  "src/greet.ts": 'export const greeting = "Hello, wrold";\n',
};

const call = (id: string, name: string, args: string) => ({ id, name, arguments: args });

/**
 * The script: every hard case of the loop once, in a session that still succeeds.
 * 1 three parallel reads, one with double-encoded arguments (repaired by preparation);
 * 2 an unknown tool (the model gets the list of tools); 3 the corrected call;
 * 4 an edit in a message cut by the length limit (refused, nothing runs);
 * 5 the edit re-issued whole; 6 a 429 with Retry-After (the turn waits, then retries);
 * 7 the final answer.
 */
function script(): ScriptStep[] {
  const stream = { chunkSize: 12, chunkDelayMs: 12 };
  const edit = JSON.stringify({
    path: "src/greet.ts",
    old_string: "Hello, wrold",
    new_string: "Hello, world",
  });
  return [
    {
      ...stream,
      text: "Let me look around first.",
      toolCalls: [
        call("call_ls", "list_dir", '{"path":"."}'),
        call("call_greet", "read_file", '{"path":"src/greet.ts"}'),
        call("call_readme", "read_file", JSON.stringify('{"path":"README.md"}')),
      ],
      usage: { inputTokens: 812, outputTokens: 64 },
    },
    {
      ...stream,
      text: "I'll check the notes online too.",
      toolCalls: [call("call_fetch", "fetch_url", '{"url":"https://example.com/notes"}')],
      usage: { inputTokens: 1104, outputTokens: 31 },
    },
    {
      ...stream,
      text: "No web access here; searching the workspace instead.",
      toolCalls: [call("call_grep", "grep", '{"pattern":"wrold","path":"."}')],
      usage: { inputTokens: 1290, outputTokens: 29 },
    },
    {
      ...stream,
      text: "Fixing the typo now.",
      toolCalls: [call("call_edit_cut", "edit_file", edit)],
      finish: "length",
      usage: { inputTokens: 1402, outputTokens: 4096 },
    },
    {
      ...stream,
      text: "That message was cut off; here is the complete edit.",
      toolCalls: [call("call_edit", "edit_file", edit)],
      usage: { inputTokens: 1530, outputTokens: 58 },
    },
    { error: { status: 429, headers: { "retry-after": "1" }, message: "rate limited (demo)" } },
    {
      ...stream,
      text: 'Done. src/greet.ts now says "Hello, world". The project has a README describing a tiny greeter, notes.txt with one todo, and src/greet.ts exporting the greeting.',
      usage: { inputTokens: 1688, outputTokens: 47 },
    },
  ];
}

/**
 * `keel demo`: a real session (the real turn, batch and tool-call machines, real built-in tools
 * on a temporary workspace) driven by a scripted model. Returns the exit code.
 */
export async function runDemo(options: DemoOptions = {}): Promise<ExitCode> {
  const out = options.out ?? process.stdout;
  let current: Session | undefined;
  const trace = createTrace({
    out,
    json: options.json,
    inboxText: (id) => inboxTextIn(current, id),
  });
  const env = options.env ?? process.env;
  // Everything that can fail on configuration comes first: nothing is left behind when it does.
  const real = demoModelIsReal(env, options.scripted);
  const model: Model = real
    ? modelFromEnv(env)
    : scriptedModel(script(), { name: "scripted-demo" });
  const choice = storeChoice(options.store);
  const store = choice.kind === "memory" ? undefined : await openStore(choice, { create: true });
  const root = mkdtempSync(join(tmpdir(), "keel-demo-"));
  let inspector: Inspector | undefined;
  let agent: ReturnType<typeof createAgent> | undefined;
  let closing =
    "inspector closed: the demo ended (keel demo --keep-open keeps it open until Ctrl-C)";
  try {
    for (const [path, text] of Object.entries(FILES)) {
      mkdirSync(join(root, path, ".."), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    inspector = options.inspect === false ? undefined : await openInspector(options.port);
    const tools = builtinTools({ root });
    agent = createAgent({
      model,
      tools,
      instructions: workspaceInstructions(root, tools),
      retry: { baseDelayMs: 200 },
      ...(store ? { store } : {}),
      ...(inspector ? { inspect: inspector.sink } : {}),
    });
    const session = agent.session();
    current = session;
    await session.ready;
    // The reader went away (`keel demo | head`): stop the turn, clean up, exit quietly.
    const stop = () => session.interrupt("stdout was closed by its reader");
    outputClosed.signal.addEventListener("abort", stop, { once: true });
    if (outputClosed.signal.aborted) stop();
    if (inspector) {
      trace.line(`inspector: ${inspector.url}`);
      await options.onInspector?.(inspector.url);
    }
    trace.line(
      `keel demo · ${real ? `model ${model.name}` : "scripted model"} · workspace ${root}${store ? ` · log ${shownStore(choice)} (session ${session.id})` : ""}`,
    );
    if (real && options.json) process.stderr.write(`keel demo: ${realModelNote(env)}\n`);
    else if (real) trace.line(realModelNote(env));
    session.subscribe(trace.onEvent);
    let steered = false;
    session.subscribe((e) => {
      // A steer that arrives while the first batch runs (docs/architecture.md).
      if (e.type === "call.started" && !steered) {
        steered = true;
        void session.steer(STEER);
      }
    });
    const result = await session.prompt(PROMPT);
    const fixed = readFileSync(join(root, "src/greet.ts"), "utf8").includes("Hello, world");
    trace.line(
      fixed ? "src/greet.ts was edited on disk: “Hello, world”." : "src/greet.ts is unchanged.",
    );
    trace.finish({ type: "result", sessionId: session.id, ...result, edited: fixed });
    const keepOpen =
      options.keepOpen ?? (options.stayOpen || out.isTTY ? untilInterrupted : undefined);
    if (inspector && keepOpen && !outputClosed.signal.aborted) {
      if (!options.json) out.write(`inspector still open at ${inspector.url} — Ctrl-C to exit\n`);
      await keepOpen();
      closing = "inspector closed";
    }
    return result.status === "completed" ? EXIT.ok : EXIT.turnFailed;
  } finally {
    await agent?.close();
    await store?.close();
    await inspector?.close();
    // Off a terminal the URL printed above is dead from here on: say so.
    if (inspector && !options.json && !outputClosed.signal.aborted) out.write(`${closing}\n`);
    rmSync(root, { recursive: true, force: true });
  }
}

/**
 * Whether the demo talks to a real model: when OPENAI_API_KEY or OPENAI_BASE_URL is set, unless
 * `--scripted` or `KEEL_DEMO_MODEL=scripted` asks for the scripted one. Throws a config error
 * for any other value of KEEL_DEMO_MODEL.
 */
export function demoModelIsReal(env: NodeJS.ProcessEnv, scripted?: boolean): boolean {
  const asked = env.KEEL_DEMO_MODEL || undefined;
  if (asked !== undefined && asked !== "scripted") {
    throw new CliError(
      `KEEL_DEMO_MODEL must be "scripted" (or unset), got ${JSON.stringify(asked)}: unset, the demo uses a real model when OPENAI_API_KEY or OPENAI_BASE_URL is set`,
      EXIT.config,
    );
  }
  if (scripted || asked === "scripted") return false;
  return Boolean(env.OPENAI_API_KEY || env.OPENAI_BASE_URL);
}

/** Says why the demo talks to a real model, and how to get the scripted one back. */
function realModelNote(env: NodeJS.ProcessEnv): string {
  const by = env.OPENAI_BASE_URL
    ? `OPENAI_BASE_URL is set (${env.OPENAI_BASE_URL})`
    : "OPENAI_API_KEY is set (api.openai.com: a paid run)";
  return `a real model, because ${by}; keel demo --scripted (or KEEL_DEMO_MODEL=scripted) runs the scripted one`;
}

function untilInterrupted(): Promise<void> {
  return new Promise((resolve) => process.once("SIGINT", () => resolve()));
}
