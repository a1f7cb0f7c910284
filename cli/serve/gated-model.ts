import type { Model, ModelEvent, ModelRequest } from "../../index.ts";

/**
 * Decides when the next model chunk may be read. Contract: returns undefined when reading may
 * go on now, else a promise that resolves when it may (it must resolve eventually).
 */
export type ReadGate = () => Promise<void> | undefined;

/**
 * A model whose streams are read only while `gate` allows: when the client is not draining
 * stdout, the next chunk is not pulled from the provider (its transport buffers or applies
 * its own backpressure) instead of piling up as event frames. An abort during the wait goes
 * straight to the provider's stream, which reports it. Every other member of `model` (its
 * window, output reserve, token counter, capabilities, image handling, and any added later) is
 * the wrapped model's own: only `stream` differs.
 */
export function gatedModel(model: Model, gate: ReadGate): Model {
  const stream = (request: ModelRequest) => gated(model.stream(request), gate, request);
  return new Proxy(model, {
    get: (target, key) => (key === "stream" ? stream : Reflect.get(target, key, target)),
  });
}

async function* gated(
  source: AsyncIterable<ModelEvent>,
  gate: ReadGate,
  request: ModelRequest,
): AsyncGenerator<ModelEvent> {
  const it = source[Symbol.asyncIterator]();
  try {
    while (true) {
      const wait = gate();
      if (wait && !request.signal.aborted) await untilOrAborted(wait, request.signal);
      const next = await it.next();
      if (next.done) return;
      yield next.value;
    }
  } finally {
    await it.return?.();
  }
}

function untilOrAborted(wait: Promise<void>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    wait.then(done);
  });
}
