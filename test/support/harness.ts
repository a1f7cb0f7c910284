import type fc from "fast-check";

/** A promise with its resolve handle: a barrier tests open when they choose. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * Fails a scheduler property with `problem` and the order the scheduler chose (the
 * counterexample to replay), or passes when `problem` is undefined.
 */
export function failWithSchedule(s: fc.Scheduler, problem: string | undefined): void {
  if (problem === undefined) return;
  const order = s
    .report()
    .map((r) => r.label)
    .join(" → ");
  throw new Error(`${problem}\n${order}`);
}

/**
 * Sends a call's event (`call.recorded`, `call.complete`, …) to the actor of that call in a
 * batch, as the runtime does (the effect that asks for it runs in that actor). Dropped, like a
 * late report, when the call has no running actor.
 */
export function toCall(
  // biome-ignore lint/suspicious/noExplicitAny: real and mutant batches alike
  batch: { getSnapshot(): any },
  event: { type: string; callId: string; [field: string]: unknown },
): void {
  const { context, children } = batch.getSnapshot();
  const i = context.index[event.callId];
  if (i === undefined || context.phases[i] !== "running") return;
  children[context.actorIds[i]]?.send(event);
}
