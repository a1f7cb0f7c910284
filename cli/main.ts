import { Command, CommanderError, InvalidArgumentError } from "commander";
import { KEEL_VERSION as VERSION } from "../contracts/version.ts";
import type { AnswerCommandOptions } from "./approve.ts";
import { CliError, EXIT, EXIT_CODES_HELP, type ExitCode, oneLine } from "./errors.ts";
import type { McpOptions } from "./mcp.ts";
import { outputClosed } from "./output.ts";
import { addServeCommand } from "./serve-command.ts";

/** A commander parser for an integer option from 1 to `max`, named in its error. */
export function positiveInt(name: string, max = Number.MAX_SAFE_INTEGER) {
  return (value: string) => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1 || n > max) {
      throw new InvalidArgumentError(`${name} must be an integer from 1 to ${max}, got "${value}"`);
    }
    return n;
  };
}

/** Builds the `keel` program; each action stores its exit code in `result.code`. */
export function buildProgram(result: { code: ExitCode }): Command {
  const program = new Command("keel")
    .description("Keel: an agent runtime where every race of the model/tool loop is a statechart.")
    .version(VERSION, "-v, --version")
    .exitOverride()
    .configureOutput({
      outputError: (text, write) =>
        write(`keel: ${text.replace(/^error: /, "").trim()} (see keel --help)\n`),
    })
    .showSuggestionAfterError(true)
    .addHelpText("after", `\n${EXIT_CODES_HELP}`);
  const store = [
    "--store <file>",
    'session store file (default ./.keel/keel.db; "memory" keeps nothing)',
  ] as const;
  const port = [
    "--port <n>",
    "the inspector's port on 127.0.0.1 (default: a free one)",
    positiveInt("--port", 65_535),
  ] as const;
  const keepOpen = [
    "--keep-open",
    "with --inspect: keep the inspector open after the turn until Ctrl-C (the default on a terminal)",
  ] as const;
  const provider = [
    "--provider <name>",
    "openai-compatible (default) | openai | anthropic | google; docs/providers.md lists the environment each reads",
  ] as const;
  const collect = (value: string, previous: string[] = []) => [...previous, value];
  const mcpCommand = [
    "--mcp <command>",
    'an MCP server to start and use over stdio, e.g. "npx -y @modelcontextprotocol/server-everything" (repeatable)',
    collect,
  ] as const;
  const mcpUrl = [
    "--mcp-url <url>",
    "an MCP server to use over Streamable HTTP (repeatable)",
    collect,
  ] as const;
  const mcpHeader = [
    "--mcp-header <header>",
    'a header sent to every --mcp-url server, e.g. "Authorization: Bearer $TOKEN" (repeatable)',
    collect,
  ] as const;
  const mcpConfig = [
    "--mcp-config <file>",
    'MCP servers from a JSON file in the shape other clients use: {"mcpServers": {"<name>": {"command", "args"} | {"url", "headers"}}}',
  ] as const;

  program
    .command("demo")
    .description(
      "run a scripted session (no API key): parallel reads, repairs, a refused truncated call, an edit, a retry",
    )
    .option("--json", "one JSON event per line")
    .option("--no-inspect", "do not serve the inspector (by default its URL is printed)")
    .option(
      "--keep-open",
      "keep the inspector open after the demo until Ctrl-C (the default on a terminal)",
    )
    .option(...port)
    .option(
      "--scripted",
      "the scripted model even when OPENAI_API_KEY or OPENAI_BASE_URL is set (also KEEL_DEMO_MODEL=scripted)",
    )
    .option(...store)
    .action(
      async (opts: {
        json?: boolean;
        inspect?: boolean;
        keepOpen?: boolean;
        scripted?: boolean;
        store?: string;
        port?: number;
      }) => {
        if (opts.port && opts.inspect === false) {
          throw new CliError(
            "--port is the inspector's port: drop --no-inspect, or drop --port",
            EXIT.usage,
          );
        }
        const { runDemo } = await import("./demo.ts");
        result.code = await runDemo({
          json: opts.json,
          inspect: opts.inspect,
          stayOpen: opts.keepOpen,
          scripted: opts.scripted,
          store: opts.store,
          ...(opts.port ? { port: opts.port } : {}),
        });
      },
    );

  program
    .command("run")
    .description("run one prompt with the built-in tools on the current directory")
    .argument("<prompt...>", "what to do (quote it)")
    .option("--json", "one JSON event per line")
    .option("-y, --yes", "allow high-risk tools (shell) without asking")
    .option("--inspect", "serve the inspector while the turn runs")
    .option(...port)
    .option(...keepOpen)
    .option(...provider)
    .option(
      "--max-steps <n>",
      "stop after this many model steps",
      positiveInt("--max-steps", 10_000),
    )
    .option(...store)
    .option(...mcpCommand)
    .option(...mcpUrl)
    .option(...mcpHeader)
    .option(...mcpConfig)
    .action(
      async (
        prompt: string[],
        opts: {
          json?: boolean;
          yes?: boolean;
          inspect?: boolean;
          keepOpen?: boolean;
          maxSteps?: number;
          store?: string;
          provider?: string;
          port?: number;
        } & McpOptions,
      ) => {
        const { runPrompt } = await import("./run.ts");
        result.code = await runPrompt(prompt.join(" "), opts);
      },
    );

  program
    .command("resume")
    .description("continue a stored session with a new prompt")
    .argument("<id>", "session id (see keel sessions)")
    .argument("<prompt...>", "what to do next")
    .option("--json", "one JSON event per line")
    .option("-y, --yes", "allow high-risk tools (shell) without asking")
    .option("--inspect", "serve the inspector while the turn runs")
    .option(...port)
    .option(...keepOpen)
    .option(...provider)
    .option(...store)
    .option(...mcpCommand)
    .option(...mcpUrl)
    .option(...mcpHeader)
    .option(...mcpConfig)
    .action(
      async (
        id: string,
        prompt: string[],
        opts: {
          json?: boolean;
          yes?: boolean;
          inspect?: boolean;
          keepOpen?: boolean;
          store?: string;
          provider?: string;
          port?: number;
        } & McpOptions,
      ) => {
        const { runPrompt } = await import("./run.ts");
        result.code = await runPrompt(prompt.join(" "), { ...opts, resume: id });
      },
    );

  program
    .command("worker")
    .description(
      "run sessions that have unconsumed inputs and no live owner, from a PostgreSQL store (SIGTERM stops gracefully)",
    )
    .requiredOption("--store <url>", "the PostgreSQL store, postgres://user:password@host:port/db")
    .option("--schema <name>", "schema of Keel's tables (default keel)")
    .option("--concurrency <n>", "sessions run at once", positiveInt("--concurrency", 1000), 4)
    .action(async (opts: { store: string; schema?: string; concurrency: number }) => {
      const { runWorkerCommand } = await import("./worker.ts");
      result.code = await runWorkerCommand(opts);
    });

  program
    .command("sessions")
    .description("list the sessions in the project's store")
    .option("--json", "a JSON array")
    .option(...store)
    .action(async (opts: { json?: boolean; store?: string }) => {
      const { listSessions } = await import("./sessions.ts");
      result.code = await listSessions(opts);
    });

  for (const kind of ["approve", "deny"] as const) {
    const cmd = program
      .command(kind)
      .description(
        kind === "approve"
          ? "approve a pending permission request of a session, from any process (the first answer wins)"
          : "deny a pending permission request of a session, from any process (the first answer wins)",
      )
      .argument("<session>", "session id (see keel sessions)")
      .argument("[request]", "the request id (see keel show); default: the only pending one")
      .option(...store)
      .option(
        "--wait <ms>",
        "how long to wait for the session's runner to apply it",
        positiveInt("--wait", 3_600_000),
        30_000,
      )
      .option("--json", "the result as JSON");
    if (kind === "approve") cmd.option("--always", "allow the tool for the rest of the session");
    else cmd.option("--feedback <text>", "tell the model why: the turn goes on with it");
    cmd.action(async (session: string, request: string | undefined, opts: AnswerCommandOptions) => {
      const { answerCommand } = await import("./approve.ts");
      result.code = await answerCommand(kind, session, request, opts);
    });
  }

  program
    .command("show")
    .description("show a session's branch tree and the projection the model sees")
    .argument("<id>", "session id (see keel sessions)")
    .option("--json", "entries, leaf and messages as one JSON object")
    .option(...store)
    .action(async (id: string, opts: { json?: boolean; store?: string }) => {
      const { showSession } = await import("./sessions.ts");
      result.code = await showSession(id, opts);
    });

  const dataDir = [
    "--data-dir <dir>",
    "where sessions wrote their files, as keel run does (default .keel)",
  ] as const;
  program
    .command("rm")
    .description(
      "delete a session and everything it owns: its log, checkpoint, posted inputs, lease, ledger rows and spilled files",
    )
    .argument("<id>", "session id (see keel sessions)")
    .option("--json", "what was removed, as JSON")
    .option(...store)
    .option(...dataDir)
    .action(async (id: string, opts: { json?: boolean; store?: string; dataDir?: string }) => {
      const { removeSession } = await import("./erase.ts");
      result.code = await removeSession(id, opts);
    });

  program
    .command("redact")
    .description(
      "replace the content of entries of a stored session with [redacted: <reason>], keeping the log's shape",
    )
    .argument("<id>", "session id (see keel sessions)")
    .argument("<entry...>", "entry ids (see keel show <id> --json)")
    .requiredOption(
      "--reason <text>",
      'why, shown in place of the content, e.g. "a pasted API key"',
    )
    .option("--json", "the redacted entries and removed files, as JSON")
    .option(...store)
    .action(
      async (
        id: string,
        entries: string[],
        opts: { reason: string; json?: boolean; store?: string },
      ) => {
        const { redactEntries } = await import("./erase.ts");
        result.code = await redactEntries(id, entries, opts);
      },
    );

  program
    .command("inspect")
    .description("serve the inspector on 127.0.0.1 (with --replay: a stored session)")
    .option("--replay <id>", "open this stored session")
    .option(...port)
    .option("--json", "print {url, port} as JSON")
    .option(...store)
    .action(async (opts: { replay?: string; port?: number; json?: boolean; store?: string }) => {
      const { runInspect } = await import("./inspect.ts");
      result.code = await runInspect(opts);
    });
  program
    .command("replay")
    .description(
      "replay a stored session through this Keel with its recorded model answers and tool results (nothing runs) and print the first divergence from its log",
    )
    .argument("<id>", "session id (see keel sessions)")
    .option(
      "--tools <module>",
      "an ES module whose default export is the tools to replay with (an array, or a function returning one); default: the built-in tools",
    )
    .option(
      "--instructions <file>",
      "replay with these instructions instead of those the log recorded",
    )
    .option(
      "--context-window <tokens>",
      "the context window of the model the session ran with (it decides when the runtime compacts; the log does not record it)",
      positiveInt("--context-window"),
    )
    .option("--json", "{ sessionId, entries, divergence } as JSON")
    .option(...store)
    .action(
      async (
        id: string,
        opts: {
          tools?: string;
          instructions?: string;
          contextWindow?: number;
          json?: boolean;
          store?: string;
        },
      ) => {
        const { runReplay } = await import("./replay.ts");
        result.code = await runReplay(id, opts);
      },
    );
  program
    .command("eval")
    .description(
      "run each task of a task set k times with a fixed budget, graded by its acceptance checks: pass@k, pass^k, cost",
    )
    .argument(
      "<tasks>",
      'a task set: JSON { "budget": {…}, "tasks": [{ "id", "prompt", "files", "checks", "expectedCalls"? }] }, or an ES module exporting it',
    )
    .option("--k <n>", "runs per task (default 5)", positiveInt("--k", 1000), 5)
    .option(
      "--json",
      "the figures, every run, and what ran (model, Keel version and commit) as JSON",
    )
    .option(
      "--model <module>",
      "an ES module whose default export ({ task, run, seed, variant }) => Model makes each run's model (default: OPENAI_* from the environment)",
    )
    .option(
      "--tools <module>",
      "an ES module whose default export ({ workspace, task, run, seed, variant }) => ToolDefinition[] makes each run's tools (default: the built-in tools)",
    )
    .option("--seed <n>", "passed to the --model factory (default 1)", positiveInt("--seed"))
    .option(
      "--compare <what>",
      "also run with a mechanism off (compaction | acceptance-loop | loop-guard), another model (model:<module>) or other tools (tools:<module>), and print both",
    )
    .action(
      async (
        file: string,
        opts: {
          k: number;
          json?: boolean;
          model?: string;
          tools?: string;
          seed?: number;
          compare?: string;
        },
      ) => {
        const { runEval } = await import("./eval.ts");
        result.code = await runEval(file, opts);
      },
    );

  addServeCommand(program, result, port, positiveInt);
  return program;
}

/** Runs `keel` with `argv` (without node and script); returns the exit code, never throws. */
export async function main(argv: string[]): Promise<ExitCode> {
  const result: { code: ExitCode } = { code: EXIT.ok };
  const program = buildProgram(result);
  if (argv.length === 0) {
    process.stdout.write(program.helpInformation());
    return EXIT.usage;
  }
  try {
    await program.parseAsync(argv, { from: "user" });
    return result.code;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (process.env.KEEL_DEBUG === "1") console.error(error);
    if (error instanceof CliError) {
      process.stderr.write(`keel: ${error.message}\n`);
      return error.exitCode;
    }
    // An optional peer dependency (a provider package, the SQLite or PostgreSQL driver) that
    // is not installed: contracts/optional-peer.ts says which and how.
    if (error instanceof Error && error.name === "MissingPeerError") {
      process.stderr.write(
        `keel: ${error.message} (beside keel: with -g for a keel installed with npm install -g)\n`,
      );
      return EXIT.config;
    }
    process.stderr.write(
      `keel: internal error: ${oneLine(error)} (run again with KEEL_DEBUG=1 for the stack, and report it)\n`,
    );
    return EXIT.internal;
  }
}

/** Runs `keel` as the process: sets the exit code and lets output drain before exiting. */
export async function runAsProcess(): Promise<void> {
  // An EPIPE is the reader saying it has read enough, not a failure of keel. `keel serve`
  // handles its own stdout (the writer ends the connection) but the listener is harmless.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE" || error.code === "ERR_STREAM_DESTROYED") {
      outputClosed.abort(new Error("stdout was closed by its reader"));
      return;
    }
    process.stderr.write(`keel: cannot write to stdout: ${oneLine(error)}\n`);
    process.exit(EXIT.internal);
  });
  process.stderr.on("error", () => {}); // nowhere left to report it
  let code = await main(process.argv.slice(2));
  if (outputClosed.signal.aborted) code = EXIT.ok;
  process.exitCode = code;
  // Anything still holding the event loop (a stray timer or socket) must not keep keel alive.
  setTimeout(() => process.exit(code), 1500).unref();
}

const entry = process.argv[1]?.replace(/\\/g, "/");
if (entry && import.meta.url.endsWith(entry)) await runAsProcess();
