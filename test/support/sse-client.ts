// A minimal reader of server-sent events over fetch, for the HTTP transport's tests: it keeps
// every event it read (with its id) and can be cut (the client going away) at any moment.

/** One event read. */
export interface ReadEvent {
  id?: string;
  event: string;
  data: string;
}

/** A stream being read: `events` grows as they arrive; `close()` cuts the connection. */
export interface SseReader {
  readonly status: number;
  readonly events: ReadEvent[];
  /** Resolves with the latest event that matches `pred` once one does (rejects after `timeoutMs`). */
  until(pred: (e: ReadEvent, all: ReadEvent[]) => boolean, timeoutMs?: number): Promise<ReadEvent>;
  /** Resolves when the server ended the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

/** Opens `url` with `headers` and reads its events. */
export async function readSse(url: string, headers: Record<string, string>): Promise<SseReader> {
  const controller = new AbortController();
  const response = await fetch(url, { headers, signal: controller.signal });
  const events: ReadEvent[] = [];
  const waiters = new Set<() => void>();
  const ended = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let at = buffer.indexOf("\n\n");
        while (at >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          const e = parseBlock(block);
          if (e) events.push(e);
          for (const wake of [...waiters]) wake();
          at = buffer.indexOf("\n\n");
        }
      }
    } catch {
      // cut by close()
    }
  })();
  return {
    status: response.status,
    events,
    ended,
    until(pred, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = events.findLast((e) => pred(e, events));
          if (!found) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `no matching event within ${timeoutMs} ms; read ${events.length}: ${events.map((e) => e.event).join(", ")}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => controller.abort(),
  };
}

function parseBlock(block: string): ReadEvent | undefined {
  const e: ReadEvent = { event: "message", data: "" };
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const at = line.indexOf(":");
    const field = at < 0 ? line : line.slice(0, at);
    const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
    if (field === "data") data.push(value);
    else if (field === "id") e.id = value;
    else if (field === "event") e.event = value;
  }
  if (data.length === 0) return undefined;
  e.data = data.join("\n");
  return e;
}
