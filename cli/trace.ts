import type { AgentEvent, AgentEventOf } from "../index.ts";
import { printable, shownCall } from "./shown-text.ts";

/**
 * Where the trace goes: a stream with the TTY fields Node's stdout has.
 * Contract: `write` accepts any string and does not throw.
 */
export interface TraceOutput {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface TraceOptions {
  out: TraceOutput;
  /** One JSON object per line (every AgentEvent as is), nothing else. */
  json?: boolean;
  /** Default: when `out` is a TTY and NO_COLOR is unset. */
  color?: boolean;
  /**
   * Milliseconds now on the agent's clock, for retry countdowns (default: the system clock).
   * Contract: monotonic, never throws.
   */
  now?: () => number;
  /**
   * The text of an inbox event by its id, so a steer's line shows what was said (the event
   * carries only its id). Contract: never throws; undefined when unknown.
   */
  inboxText?: (inboxId: string) => string | undefined;
}

/** Prints a session's events for people (lines + a live status line on a TTY) or as JSON. */
export interface Trace {
  /** Contract: never throws; fast. */
  onEvent(event: AgentEvent): void;
  /** Prints a line of the command's own (above the status line). */
  line(text: string): void;
  /** Hides the status line while something else uses the terminal (a y/n question). */
  pause(paused: boolean): void;
  /** Prints a final JSON record (json mode) or nothing; stops the status line. */
  finish(record: Record<string, unknown>): void;
}

const ESC = "\x1b[";

/** What the trace, the inspector and the docs call each inbox lane. */
export const LANE_NAMES: Readonly<Record<AgentEventOf<"inbox.received">["lane"], string>> = {
  interrupt: "interrupt",
  "next-step": "steer",
  "next-turn": "follow-up",
};

/**
 * `text` on one line, at most `max` characters: cut at a word boundary where there is one,
 * with "…" when anything was left out.
 */
export function clip(text: string, max: number): string {
  const line = text.replace(/\s*\n\s*/g, " ").trim();
  if (line.length <= max) return line;
  const cut = line.slice(0, max - 1);
  const space = cut.lastIndexOf(" ");
  return `${space > max / 2 ? cut.slice(0, space) : cut}…`;
}

/**
 * The retry policy's reason ("<why>; retry 1/2 in 1000 ms (provider's Retry-After)") as the
 * trace's retry line shows it: the count and the wait once, then why.
 */
export function retryLine(e: AgentEventOf<"retry.scheduled">): string {
  const m = /^(.*); (?:retry|continue) (\d+)\/(\d+) in \d+ ms \(([^)]*)\)$/s.exec(e.reason);
  const wait = `${(e.delayMs / 1000).toFixed(1)} s`;
  return m
    ? `↻ ${e.mode} ${m[2]} of ${m[3]} in ${wait} (${m[4]}) — ${m[1]}`
    : `↻ ${e.mode} #${e.retry} in ${wait} — ${e.reason}`;
}

/**
 * The status line's context figure: share of the window in use, then the share kept free for
 * the answer (the reserve, counted from the start); "≈" while it is an estimate from characters
 * (no provider usage yet, or none trusted since the history changed), so the figure's jump when
 * the provider's count arrives is explained.
 */
export function contextFigure(e: AgentEventOf<"context.measured">): string {
  if (!Number.isFinite(e.window)) return `${e.trusted ? "" : "≈"}${e.used} tok`;
  const pct = (n: number) => Math.round((100 * n) / e.window);
  return `${e.trusted ? "" : "≈"}${pct(e.used)}% of ${e.window} (+${pct(e.reserve)}% reserved)`;
}

/** "1 model request", "2 model requests", "0 model requests". */
export function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/**
 * Creates a trace. Human mode prints one line per meaningful event (model request, assistant
 * text, tool calls with duration and outcome, retries, turn end); on a TTY the bottom line is a
 * status line (model requests, tokens, running calls, retry countdown) redrawn in place every
 * 100 ms.
 */
export function createTrace(options: TraceOptions): Trace {
  const { out } = options;
  const tty = Boolean(out.isTTY) && !options.json;
  const color = options.color ?? (tty && !process.env.NO_COLOR);
  const now = options.now ?? (() => performance.timeOrigin + performance.now());
  const paint = (code: string, text: string) => (color ? `${ESC}${code}m${text}${ESC}0m` : text);
  const dim = (t: string) => paint("2", t);
  const state = {
    /** Model requests of the current turn (a retry is a request too). */
    requests: 0,
    tokensIn: 0,
    tokensOut: 0,
    running: new Map<string, { name: string; at: number }>(),
    retryAt: 0,
    retryReason: "",
    writing: "",
    started: now(),
    /** The last context budget: "used/window" for the status line. */
    context: "",
    /** The request waiting for a provider slot, for the status line ("" when none waits). */
    queued: "",
  };
  const startedAt = new Map<string, number>();
  let statusShown = false;
  let paused = false;
  let timer: ReturnType<typeof setInterval> | undefined;

  const clearStatus = () => {
    if (statusShown) out.write(`\r${ESC}2K`);
    statusShown = false;
  };
  const drawStatus = () => {
    if (!tty || paused) return;
    const parts = [`request ${state.requests}`, `${state.tokensIn}↑ ${state.tokensOut}↓ tok`];
    if (state.context) parts.push(`context ${state.context}`);
    if (state.queued) parts.push(`waiting for ${state.queued}`);
    if (state.running.size) {
      parts.push(`running ${[...state.running.values()].map((c) => c.name).join(", ")}`);
    }
    const wait = state.retryAt - now();
    if (wait > 0) parts.push(`retry in ${(wait / 1000).toFixed(1)}s`);
    if (state.writing) parts.push(`“${state.writing.replace(/\s+/g, " ").slice(-40)}”`);
    const spin = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"[Math.floor(now() / 100) % 10];
    const text = `${spin} ${parts.join(" · ")}`;
    const width = Math.max(20, (out.columns || 80) - 1);
    out.write(`\r${ESC}2K${dim(text.length > width ? `${text.slice(0, width - 1)}…` : text)}`);
    statusShown = true;
  };
  const print = (text: string) => {
    clearStatus();
    out.write(`${text}\n`);
    drawStatus();
  };
  if (tty) {
    timer = setInterval(drawStatus, 100);
    timer.unref();
  }

  const describeResult = (e: Extract<AgentEvent, { type: "call.settled" }>) => {
    const r = e.result;
    const text = r.ok ? r.content : `${r.code}: ${r.message}`;
    const first = text.split("\n").find((l) => l.trim()) ?? "";
    const lines = text.split("\n").length;
    return `${clip(first, 120)}${lines > 1 ? dim(` (+${lines - 1} lines)`) : ""}`;
  };

  const human = (e: AgentEvent) => {
    switch (e.type) {
      case "turn.started":
        state.requests = 0;
        print(`${paint("1", "›")} ${e.input}`);
        break;
      case "attempt.started":
        state.requests++;
        state.writing = "";
        print(dim(`── model request ${state.requests} ${"─".repeat(40)}`));
        break;
      case "text.streamed":
        state.writing += e.text;
        break;
      case "attempt.queued":
        state.queued = `${e.provider} slot, #${e.position}`;
        print(
          paint(
            "33",
            `  ⧗ waiting for a ${e.provider} slot: ${counted(e.limit, "request")} in flight at most, #${e.position} in the queue`,
          ),
        );
        break;
      case "attempt.admitted":
        state.queued = "";
        print(dim(`  ▷ ${e.provider} slot taken after ${(e.waitedMs / 1000).toFixed(1)} s`));
        break;
      case "attempt.ended":
        if (e.status !== "completed") {
          print(paint("33", `  ⚠ attempt ${e.status}${e.error ? `: ${clip(e.error, 300)}` : ""}`));
        }
        break;
      case "message.committed":
        state.writing = "";
        if (e.usage) {
          state.tokensIn += e.usage.inputTokens;
          state.tokensOut += e.usage.outputTokens;
        }
        if (e.text.trim()) print(`  ${e.text.trim().replace(/\n/g, "\n  ")}`);
        break;
      case "call.queued":
      case "call.previewed":
      case "call.updated":
      case "batch.committed":
      case "turn.execution-stopped":
      case "permission.requested": // the approver asks (cli/approval.ts)
      case "permission.decided":
        break; // the lines around them say it already
      case "call.started": {
        startedAt.set(e.callId, e.at);
        state.running.set(e.callId, { name: e.name, at: e.at });
        // Counted spaces: what follows a wall of spaces stays in sight (cli/shown-text.ts).
        const { text: args, collapsed } = shownCall(e.args);
        const cut = args.length > 80 ? `${args.slice(0, 79)}… (+${args.length - 79} chars)` : args;
        print(
          `  ${paint("34", "▶")} ${e.name} ${dim(`${cut}${collapsed ? " (spaces counted)" : ""}`)}`,
        );
        break;
      }
      case "call.settled": {
        state.running.delete(e.callId);
        const began = startedAt.get(e.callId);
        const took = began === undefined ? "" : `${Math.round(e.at - began)} ms `;
        const mark =
          e.outcome === "completed"
            ? paint("32", "✓")
            : e.outcome === "unknown"
              ? paint("33", "?")
              : paint("31", "✗");
        print(`  ${mark} ${e.name} ${dim(`${took}${e.outcome}`)}  ${describeResult(e)}`);
        break;
      }
      case "call.stop-requested":
        print(paint("33", `  ■ stopping ${e.callId}`));
        break;
      case "retry.scheduled":
        state.retryAt = e.readyAt;
        state.retryReason = e.reason;
        print(paint("33", `  ${retryLine(e)}`));
        if (e.fallback) print(paint("33", `    ${e.fallback}`));
        break;
      case "loop.detected":
        print(
          paint(
            e.action === "stopped" ? "31" : "33",
            e.action === "stopped"
              ? `  ⟲ loop detected: ${e.tool} failed the same way ${e.repeats} times in a row — ending the turn`
              : `  ⟲ ${e.tool} failed the same way ${e.repeats} times in a row — the model is told to change approach`,
          ),
        );
        break;
      case "inbox.received":
        // A follow-up or prompt shows as its turn's first line (turn.started).
        if (e.lane !== "next-turn") {
          const text = options.inboxText?.(e.inboxId);
          print(
            paint(
              "35",
              `  ✉ ${LANE_NAMES[e.lane]} received (${e.source})${text ? `: ${clip(text, 100)}` : ""}`,
            ),
          );
        }
        break;
      case "inbox.consumed":
        if (e.lane === "next-step") print(paint("35", "  ✉ steer read at the safe point"));
        break;
      case "turn.cancel-acknowledged":
        print(paint("33", `  ■ cancelling: ${e.reason}`));
        break;
      case "turn.ended": {
        const secs = ((e.at - state.started) / 1000).toFixed(1);
        // A completed turn with a reason ended on a cut or filtered answer: not a clean ✔.
        const mark =
          e.status !== "completed"
            ? paint("31", "✘")
            : e.reason
              ? paint("33", "⚠")
              : paint("32", "✔");
        print(
          `${mark} turn ${e.status}${e.reason ? `: ${e.reason}` : ""} ${dim(`· ${counted(state.requests, "model request")} · ${state.tokensIn} tokens in, ${state.tokensOut} out · ${secs} s`)}`,
        );
        break;
      }
      case "context.measured":
        state.context = contextFigure(e);
        break;
      case "context.compacted":
        print(
          paint(
            e.ok ? "36" : "33",
            e.ok
              ? `  ⇣ context compacted (${e.mode}): ${e.tokensBefore} → ${e.tokensAfter} tokens`
              : `  ⚠ compaction (${e.mode}) did not happen: ${e.reason}`,
          ),
        );
        break;
      case "acceptance.started":
        print(
          paint(
            "36",
            `  ⚖ acceptance round ${e.round}: ${e.checks.length > 0 ? e.checks.join(", ") : "no stale check to run"}`,
          ),
        );
        break;
      case "check.started":
        break; // its end says everything (a running check shows on the status line of the inspector)
      case "check.ended":
        print(
          `    ${e.passed ? paint("32", "✓") : paint("31", "✗")} ${e.name}${e.kind === "opinion" ? dim(" (opinion, not evidence)") : ""} ${dim(`${e.durationMs} ms`)}`,
        );
        break;
      case "follow-up.sent":
        print(
          paint(
            "33",
            `  ↺ follow-up ${e.round}: failing ${e.failing.join(", ")} sent to the model`,
          ),
        );
        break;
      case "acceptance.checked": {
        const mark =
          e.acceptance === "passed"
            ? paint("32", "✔")
            : e.acceptance === "failed"
              ? paint("31", "✘")
              : paint("33", "…");
        print(
          `${mark} acceptance ${e.acceptance} ${dim(`· ${e.evidence.checks.filter((c) => c.kind === "check" && c.passed).length}/${e.evidence.checks.filter((c) => c.kind === "check").length} checks passed · ${e.rounds} follow-up(s) · artifact ${e.evidence.artifactVersion ?? "?"}`)}`,
        );
        break;
      }
      case "log.written":
        print(
          paint(
            e.level === "warn" ? "33" : "2",
            `  ${e.level === "warn" ? "⚠" : "·"} ${e.message}`,
          ),
        );
        break;
      default: {
        // Exhaustive: a new event type fails tsc here until the trace handles it.
        const unhandled: never = e;
        void unhandled;
      }
    }
  };

  return {
    onEvent(event) {
      try {
        if (options.json) out.write(`${JSON.stringify(event)}\n`);
        // Model, tool and client text never drives the terminal: controls are shown escaped.
        else human(safeStrings(event, 0) as AgentEvent);
      } catch {
        // Contract: never throws into the session's event fan-out.
      }
    },
    line(text) {
      if (options.json) return;
      print(text);
    },
    pause(value) {
      if (value) clearStatus();
      paused = value;
      if (!value) drawStatus();
    },
    finish(record) {
      if (timer) clearInterval(timer);
      clearStatus();
      if (options.json) out.write(`${JSON.stringify(record)}\n`);
    },
  };
}

/** `value` with every string made {@link printable} (controls escaped). Pure; depth-bounded. */
function safeStrings(value: unknown, depth: number): unknown {
  if (typeof value === "string") return printable(value);
  if (typeof value !== "object" || value === null || depth > 8) return value;
  if (Array.isArray(value)) return value.map((v) => safeStrings(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = safeStrings(v, depth + 1);
  return out;
}
