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
