import { type Model, ModelError, type ModelEvent, type ModelRequest } from "../contracts/model.ts";
import type { LogEntry } from "../session/entries.ts";
import type { SessionStore, SessionSummary } from "../session/store.ts";
import type { Tool } from "../tools/define-tool.ts";
import type { ToolContext } from "../tools/types.ts";

/**
 * Fault injection and scheduler helpers for `keel/testing`: what Keel's own interleaving searches
 * use, for users' tools and models. Test-only: nothing in the runtime calls them.
 */

/**
 * The part of fast-check's `fc.scheduler()` the helpers need (structural: `keel/testing` does not
 * depend on fast-check). Contract: `schedule` resolves with `task`'s value when the scheduler
 * decides, never before `task` itself resolved.
 */
export interface TaskScheduler {
  /** Resolves with `task`'s value when the scheduler picks it (fast-check's `s.schedule`). */
  schedule<T>(task: Promise<T>, label?: string): Promise<T>;
}

/**
 * A fault for one model request.
 * - `http`: the request fails before any chunk with this status (429, 503, …); `retryAfter` is
 *   sent as the `Retry-After` header: seconds (a number or a string such as `"1.5"`) or a
 *   `Date` (sent in the HTTP-date form); `retryAfterMs` as `retry-after-ms`.
 * - `stream_cut`: the stream ends with a `stream_cut` error after `afterChunks` events.
 * - `network`: the connection fails before any chunk.
 */
export type ModelFault =
  | { type: "http"; status: number; retryAfter?: number | string | Date; retryAfterMs?: number }
  | { type: "stream_cut"; afterChunks: number }
  | { type: "network" };

/** Per request (0-based, counting every request the wrapper saw): the fault, if any. */
export type ModelFaultPlan =
  | ReadonlyArray<ModelFault | undefined>
  | ((request: ModelRequest, index: number) => ModelFault | undefined);

/** The `ModelError` a fault raises, as a real provider adapter would report it. */
export function modelFaultError(fault: ModelFault): ModelError {
  if (fault.type === "network")
    return new ModelError("connection reset (injected)", { kind: "network" });
  if (fault.type === "stream_cut")
    return new ModelError("the stream was cut (injected)", { kind: "stream_cut" });
  const headers: Record<string, string> = {};
  const ra = fault.retryAfter;
  if (ra instanceof Date) headers["retry-after"] = ra.toUTCString();
  else if (ra !== undefined) headers["retry-after"] = String(ra);
  if (fault.retryAfterMs !== undefined) headers["retry-after-ms"] = String(fault.retryAfterMs);
  return new ModelError(`${fault.status} (injected)`, {
    kind: "http",
    status: fault.status,
    headers,
  });
}

/**
 * Wraps a model so that the requests `plan` names fail: before any chunk (`http`, `network`) or
 * after some chunks (`stream_cut`). Other requests go to `model` unchanged. `requests` counts
 * every request, faulted or not.
 */
export function faultyModel(model: Model, plan: ModelFaultPlan): Model & { requests: number } {
  const faultAt =
    typeof plan === "function"
      ? plan
      : (_: ModelRequest, i: number): ModelFault | undefined => plan[i];
  const wrapped = {
    name: model.name,
    requests: 0,
    async *stream(request: ModelRequest): AsyncIterable<ModelEvent> {
      const index = wrapped.requests++;
      const fault = faultAt(request, index);
      if (fault && fault.type !== "stream_cut") throw modelFaultError(fault);
      let sent = 0;
      for await (const event of model.stream(request)) {
        if (fault && sent >= fault.afterChunks) throw modelFaultError(fault);
        yield event;
        sent++;
      }
      if (fault) throw modelFaultError(fault);
    },
  };
  return wrapped;
}

/**
 * A fault for one execution of a tool.
 * - `crash`: the tool throws `message` (the call settles failed, `EXECUTION_FAILED`).
 * - `hang`: the tool never returns and ignores its signal (the stop deadline decides).
 * - `kill`: a kill point: `onKill` runs (e.g. `killableStore(...).kill()`), before the tool's
 *   side effect or, with `afterEffect`, after it and before its result is recorded; the tool
 *   then never returns, as in a process that died there.
 */
export type ToolFault =
  | { type: "crash"; message?: string }
  | { type: "hang" }
  | { type: "kill"; afterEffect?: boolean };

/** How `faultyTool` misbehaves: which execution gets which fault. */
export interface FaultyToolOptions<Args> {
  /** Per execution (0-based, counting every execution of this wrapper): the fault, if any. */
  faults: (args: Args, ctx: ToolContext, execution: number) => ToolFault | undefined;
  /** Called at a `kill` point. Contract: must not throw. */
  onKill?: () => void;
}

/** Wraps a tool so that the executions `faults` names crash, hang or reach a kill point. */
// biome-ignore lint/suspicious/noExplicitAny: wraps a tool of any argument type
export function faultyTool<Args = any>(
  tool: Tool<Args>,
  options: FaultyToolOptions<Args>,
): Tool<Args> {
  let executions = 0;
  const never = new Promise<never>(() => {});
  return {
    ...tool,
    execute: async (args, ctx) => {
      const fault = options.faults(args, ctx, executions++);
      if (!fault) return tool.execute(args, ctx);
      if (fault.type === "crash")
        throw new Error(fault.message ?? `${tool.name} crashed (injected)`);
      if (fault.type === "hang") return never;
      if (fault.afterEffect) await tool.execute(args, ctx);
      options.onKill?.();
      return never;
    },
  };
}

/**
 * A store whose process can be killed: after `kill()`, appends never settle (a dead process
 * acknowledges nothing) and nothing more reaches `inner`, which keeps exactly what was durable
 * at the kill point. Reopen the session on `inner` to test crash recovery in one process.
 */
export function killableStore(inner: SessionStore): {
  /** The store to give the agent. */
  store: SessionStore;
  /** Kills the "process": nothing written after this reaches `inner`. */
  kill: () => void;
  /** Whether `kill()` was called. */
  readonly killed: boolean;
} {
  let killed = false;
  const never = new Promise<never>(() => {});
  const store: SessionStore = {
    kind: `${inner.kind}+killable`,
    append: (sessionId: string, entries: readonly LogEntry[]) =>
      killed ? never : inner.append(sessionId, entries),
    load: (sessionId: string): Promise<LogEntry[]> => inner.load(sessionId),
    list: (): Promise<SessionSummary[]> => inner.list(),
    close: () => (killed ? Promise.resolve() : inner.close()),
  };
  return {
    store,
    kill: () => {
      killed = true;
    },
    get killed() {
      return killed;
    },
  };
}

/**
 * Scheduler helpers: make a model's answers and a tool's returns tasks of a `fc.scheduler()`, so
 * the search picks their order against inputs, cancels, clock steps and kill points.
 */

/** Each request waits for the scheduler (task `model answers <attemptId>`) before streaming. */
export function scheduledModel(model: Model, s: TaskScheduler): Model {
  return {
    name: model.name,
    async *stream(request) {
      await s.schedule(Promise.resolve(), `model answers ${request.attemptId}`);
      yield* model.stream(request);
    },
  };
}

/** Each execution returns when the scheduler says (task `<tool> <callId> returns`). */
// biome-ignore lint/suspicious/noExplicitAny: wraps a tool of any argument type
export function scheduledTool<Args = any>(tool: Tool<Args>, s: TaskScheduler): Tool<Args> {
  return {
    ...tool,
    execute: async (args, ctx) => {
      const out = await tool.execute(args, ctx);
      return s.schedule(Promise.resolve(out), `${tool.name} ${ctx.callId} returns`);
    },
  };
}

/**
 * Schedules `steps` clock increments as tasks (`clock +<ms>`), in order: a race between virtual
 * time and everything else the scheduler holds. Resolves when the last step ran.
 */
export async function scheduledClockSteps(
  clock: { increment(ms: number): void },
  s: TaskScheduler,
  steps: readonly number[],
): Promise<void> {
  for (const ms of steps) {
    await s.schedule(Promise.resolve(), `clock +${ms}`);
    clock.increment(ms);
  }
}
