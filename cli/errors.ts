/** What a `keel` exit code says happened. Documented in `keel --help`. */
export const EXIT = {
  ok: 0,
  /** The turn ended without completing: failed, cancelled or out of budget. */
  turnFailed: 1,
  /** A bad command, option or argument. */
  usage: 2,
  /** Configuration is missing or wrong (API key, model, store). */
  config: 3,
  /** The named session does not exist. */
  notFound: 4,
  /** `keel replay`: the replay wrote something other than the log holds. */
  diverged: 5,
  /** A bug in keel (the message says where to report it). */
  internal: 70,
  /** Stopped by Ctrl-C. */
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The epilogue of `keel --help`. */
export const EXIT_CODES_HELP = `Exit codes:
  0    ok
  1    the turn did not complete (failed, cancelled or budget exhausted)
  2    usage error (unknown command, bad option or argument)
  3    configuration error (e.g. OPENAI_API_KEY missing, store not writable)
  4    not found (no session with that id)
  5    keel replay: the replay diverged from the log (the first divergence is printed)
  70   internal error (please report it; KEEL_DEBUG=1 shows the stack)
  130  interrupted (Ctrl-C)

Environment:
  KEEL_PROVIDER    openai-compatible (default) | openai | anthropic | google, like --provider
  OPENAI_API_KEY   key for openai and openai-compatible (not needed with a local OPENAI_BASE_URL)
  OPENAI_BASE_URL  another OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1
  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL                          for --provider anthropic
  GOOGLE_GENERATIVE_AI_API_KEY, GOOGLE_GENERATIVE_AI_BASE_URL    for --provider google
  KEEL_MODEL       model name (default per provider: gpt-4.1-mini, claude-sonnet-4-5, gemini-2.5-flash)
  KEEL_DEBUG=1     show stack traces
  KEEL_LOG=debug   runtime logs on stderr`;

/**
 * An error meant for the user: one line saying what is wrong and how to fix it, and the exit
 * code. Thrown by commands, caught once at the top level of `keel`.
 */
export class CliError extends Error {
  override readonly name = "CliError";
  readonly exitCode: ExitCode;
  constructor(message: string, exitCode: ExitCode) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** The first line of an error's message, for a one-line report. */
export function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return (text.split("\n").find((line) => line.trim()) ?? text).trim();
}
