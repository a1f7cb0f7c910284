import type { TraceContext } from "../tools/types.ts";

/**
 * What a telemetry consumer opened for one running call: its span's context, and how to run
 * code inside it (OpenTelemetry's `context.with`), so that the tool's own spans nest under the
 * call's span whether the tool reads `ctx.traceContext` or the active context.
 */
export interface CallScope {
  context: TraceContext;
  /** Runs `fn` with `context` active. Contract: calls `fn` once, synchronously; returns its result. */
  run<T>(fn: () => T): T;
}

/** Open scopes by session and call id. Empty unless telemetry is on: one size check per call. */
const scopes = new Map<string, CallScope>();
const keyOf = (sessionId: string, callId: string) => `${sessionId}\u0000${callId}`;

/**
 * Opens the scope of call `callId` of session `sessionId` until the returned function is called.
 * A telemetry consumer calls it when it sees `call.started`, which the call runner emits
 * synchronously just before it runs the tool (actors/turn-runner.ts `runCall`).
 */
export function openCallScope(sessionId: string, callId: string, scope: CallScope): () => void {
  const key = keyOf(sessionId, callId);
  scopes.set(key, scope);
  return () => {
    if (scopes.get(key) === scope) scopes.delete(key);
  };
}

/**
 * Runs a call's `execute(ctx)` inside the scope opened for it, with `ctx.traceContext` set;
 * without one (no telemetry), runs it as it is. Used by `runTool` (actors/run-tool.ts).
 */
export function withCallSpan<C extends { sessionId: string; callId: string }, T>(
  ctx: C,
  fn: (ctx: C) => T,
): T {
  if (scopes.size === 0) return fn(ctx);
  const scope = scopes.get(keyOf(ctx.sessionId, ctx.callId));
  if (!scope) return fn(ctx);
  // The tool's context keeps every property of the runner's (getters included) and adds the span.
  const scoped = Object.create(ctx, { traceContext: { value: scope.context, enumerable: true } });
  return scope.run(() => fn(scoped));
}
