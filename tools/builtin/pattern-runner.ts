import { Worker } from "node:worker_threads";

/**
 * Model-chosen patterns (`grep`'s regular expression, `glob` patterns) run off the event loop,
 * in a worker thread with deadlines (invariant 16 in docs/architecture.md: no single input
 * stalls the event loop). A backtracking regular expression such as `^(a+)+$` costs time
 * exponential in its input, and JavaScript cannot interrupt a running `RegExp` on its own
 * thread: in a worker it blocks nothing else, and a worker that stops reporting progress is
 * terminated, which does interrupt it. The patterns keep JavaScript's syntax and meaning
 * (lookaround, backreferences), which a linear-time engine would refuse; the measurements that
 * chose this over a linear-time engine (re2js) are in bench/results/pattern-engine.md.
 */

/** A worker that reports no progress for this long is stuck on one line or path: it is ended. */
export const STALL_DEADLINE_MS = 2_000;
/** The whole matching work of one call may take this long. */
export const CALL_DEADLINE_MS = 30_000;

/** Why a pattern did not finish: the message says which bound it crossed and what to do. */
export class PatternTimeoutError extends Error {
  override readonly name = "PatternTimeoutError";
}

// Plain JavaScript, evaluated as the worker's script: no file to resolve in src or dist.
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads");
let last = performance.now();
const tick = (id) => {
  const now = performance.now();
  if (now - last > 100) { last = now; parentPort.postMessage({ id, type: "progress" }); }
};
parentPort.on("message", (m) => {
  try {
    const re = m.op === "strings" ? null : new RegExp(m.source, m.flags);
    last = performance.now();
    if (m.op === "lines") {
      const text = new TextDecoder("utf-8").decode(m.bytes);
      const lines = [];
      let count = 0, start = 0, n = 0;
      while (start <= text.length && lines.length < m.limit) {
        let nl = text.indexOf("\\n", start);
        if (nl === -1) nl = text.length;
        const line = text.slice(start, nl);
        n++;
        if (re.test(line)) {
          count++;
          if (count > m.skip) lines.push([n, line.length > m.lineChars ? line.slice(0, m.lineChars) : line]);
        }
        if ((n & 63) === 0) tick(m.id);
        start = nl + 1;
      }
      parentPort.postMessage({ id: m.id, type: "done", result: { count, lines } });
    } else if (m.op === "strings") {
      // Each string against its own pattern (m.sources[i]); the first that fails, or -1.
      let failed = -1;
      for (let i = 0; i < m.strings.length && failed === -1; i++) {
        const own = new RegExp(m.sources[i], m.flagsOf[i]);
        if (!own.test(m.strings[i])) failed = i;
        tick(m.id);
      }
      parentPort.postMessage({ id: m.id, type: "done", result: failed });
    } else {
      const paths = m.paths === "" ? [] : m.paths.split("\\n");
      const kept = [];
      for (let i = 0; i < paths.length; i++) {
        if (re.test(paths[i])) kept.push(paths[i]);
        if ((i & 255) === 0) tick(m.id);
      }
      parentPort.postMessage({ id: m.id, type: "done", result: kept.join("\\n") });
    }
  } catch (e) {
    parentPort.postMessage({ id: m.id, type: "error", message: String((e && e.message) || e) });
  }
});
`;

/** The matching lines of one text: how many matched, and those kept (1-based line, text). */
export interface LineMatches {
  count: number;
  lines: [line: number, text: string][];
}

/** Where patterns run: the worker runner, or (mutation tests only) inline on the event loop. */
export interface PatternEngine {
  matchLines: PatternRunner["matchLines"];
  filterPaths: PatternRunner["filterPaths"];
}

/**
 * @internal Test seam: the old path, every pattern run synchronously on the event loop. It
 * exists so the invariant test can show that its stall probe catches a regression (a
 * catastrophic pattern then freezes the process); never used outside tests.
 */
export const inlineEngine: PatternEngine = {
  async matchLines(source, flags, bytes, bounds) {
    const re = new RegExp(source, flags);
    const lines: [number, string][] = [];
    let count = 0;
    for (const [i, line] of new TextDecoder().decode(bytes).split("\n").entries()) {
      if (lines.length >= bounds.limit) break;
      if (!re.test(line)) continue;
      if (++count > bounds.skip) lines.push([i + 1, line.slice(0, bounds.lineChars)]);
    }
    return { count, lines };
  },
  async filterPaths(source, paths) {
    const re = new RegExp(source);
    return paths.filter((p) => re.test(p));
  },
};

/**
 * Runs a pattern in a worker, reusing an idle one. Contract of `run`: resolves with the
 * worker's result; rejects with a {@link PatternTimeoutError} when the worker reported no
 * progress for `stallMs` or the call's `deadline` (clock ms) passed, with the `SyntaxError` of
 * an invalid pattern, or with `signal`'s reason when it aborts — the worker is then terminated.
 */
export class PatternRunner implements PatternEngine {
  private readonly idle: Worker[] = [];
  private seq = 0;
  private readonly stallMs: number;

  constructor(options: { stallMs?: number } = {}) {
    this.stallMs = options.stallMs ?? STALL_DEADLINE_MS;
  }

  /** Lines of `bytes` (UTF-8) that `source` matches: skips `skip` matches, keeps `limit`. */
  matchLines(
    source: string,
    flags: string,
    bytes: Uint8Array,
    bounds: { skip: number; limit: number; lineChars: number; deadline: number },
    signal?: AbortSignal,
  ): Promise<LineMatches> {
    const copy = bytes.slice(); // its own buffer, transferred
    return this.run(
      { op: "lines", source, flags, bytes: copy, ...bounds },
      [copy.buffer as ArrayBuffer],
      bounds.deadline,
      signal,
    ) as Promise<LineMatches>;
  }

  /** The paths `source` matches, in order. */
  async filterPaths(
    source: string,
    paths: readonly string[],
    deadline: number,
    signal?: AbortSignal,
  ): Promise<string[]> {
    if (paths.length === 0) return [];
    const kept = (await this.run(
      { op: "paths", source, flags: "", paths: paths.join("\n") },
      [],
      deadline,
      signal,
    )) as string;
    return kept === "" ? [] : kept.split("\n");
  }

  /**
   * Tests each of `strings` against its own pattern (`sources[i]`, with `flagsOf[i]`): resolves with
   * the index of the first that does not match, or -1 when all do. Used for JSON Schema
   * `pattern`s (docs/tools.md, "Schema patterns"): the same bounds as grep's.
   */
  async firstMismatch(
    sources: readonly string[],
    strings: readonly string[],
    flagsOf: readonly string[],
    deadline: number,
    signal?: AbortSignal,
  ): Promise<number> {
    if (strings.length === 0) return -1;
    return (await this.run(
      { op: "strings", sources, strings, flagsOf },
      [],
      deadline,
      signal,
    )) as number;
  }

  private run(
    message: Record<string, unknown>,
    transfer: ArrayBuffer[],
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    signal?.throwIfAborted();
    const reused = this.idle.pop();
    const worker = reused ?? this.spawn();
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      let stall: NodeJS.Timeout;
      const whole = setTimeout(
        () =>
          end(
            new PatternTimeoutError(
              `matching did not finish within ${CALL_DEADLINE_MS} ms (the bound on one call); narrow the path or simplify the pattern`,
            ),
          ),
        Math.max(0, deadline - performance.now()),
      );
      const arm = () => {
        clearTimeout(stall);
        stall = setTimeout(
          () =>
            end(
              new PatternTimeoutError(
                `the pattern ran over ${this.stallMs} ms on a single line or path and was stopped: it backtracks catastrophically (nested quantifiers such as (a+)+ or (a|a)*, or many * in a glob). Simplify it`,
              ),
            ),
          this.stallMs,
        );
      };
      const onMessage = (m: { id: number; type: string; result?: unknown; message?: string }) => {
        if (m.id !== id) return;
        if (m.type === "progress") return arm();
        if (m.type === "done") end(undefined, m.result);
        else end(new SyntaxError(m.message));
      };
      const onError = (err: Error) => end(err);
      const onAbort = () => end(signal?.reason ?? new Error("aborted"));
      const end = (err: unknown, result?: unknown) => {
        clearTimeout(stall);
        clearTimeout(whole);
        worker.off("message", onMessage);
        worker.off("error", onError);
        signal?.removeEventListener("abort", onAbort);
        if (err === undefined) {
          if (this.idle.length < 2) this.idle.push(worker);
          else void worker.terminate();
          resolve(result);
        } else {
          // A worker stuck in a regular expression is ended; the next call starts a new one.
          if (!(err instanceof SyntaxError)) void worker.terminate();
          else if (this.idle.length < 2) this.idle.push(worker);
          reject(err);
        }
      };
      worker.on("message", onMessage);
      worker.on("error", onError);
      signal?.addEventListener("abort", onAbort, { once: true });
      // A new worker's start-up (its own event loop, module set-up) is not the pattern's time.
      if (reused) arm();
      else worker.once("online", arm);
      worker.postMessage({ ...message, id }, transfer);
    });
  }

  private spawn(): Worker {
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    worker.unref(); // an idle worker never keeps the process alive
    worker.on("error", () => {}); // reported to the call that uses it
    return worker;
  }

  /** Ends the idle workers (tests; a process that wants to drop them at once). */
  async close(): Promise<void> {
    const idle = this.idle.splice(0);
    await Promise.all(idle.map((w) => w.terminate()));
  }
}

/** The process's shared runner: workers are made on first use. */
export const patternRunner = new PatternRunner();
