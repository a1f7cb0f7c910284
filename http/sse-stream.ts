/** One server-sent event: `event` name (absent: `message`), `id` (absent: none), `data` text. */
export interface SseEvent {
  event?: string;
  id?: string;
  data: string;
}

/** A server-sent events stream being written (see {@link sseStream}). */
export interface SseWriter {
  /** Writes one event; false once the stream is closed (the client left or it fell behind). */
  write(event: SseEvent): boolean;
  /** Ends the stream (idempotent). */
  close(): void;
  /** Whether the stream is closed. */
  readonly closed: boolean;
}

/** Options of {@link sseStream}. */
export interface SseStreamOptions {
  /** A comment line this often keeps proxies from closing an idle stream (ms). */
  heartbeatMs: number;
  /**
   * Bytes that may wait for a client that does not read before the stream is closed (it then
   * reconnects with `Last-Event-ID` and misses nothing durable).
   */
  maxBufferedBytes: number;
  /** Called once when the stream closes, for any reason. Contract: must not throw. */
  onClose: () => void;
}

const encoder = new TextEncoder();

/** The wire form of one event: each line of `data` its own `data:` field. */
export function encodeSse(event: SseEvent): string {
  let out = "";
  if (event.event) out += `event: ${event.event}\n`;
  if (event.id !== undefined) out += `id: ${event.id}\n`;
  for (const line of event.data.split(/\r\n|\r|\n/)) out += `data: ${line}\n`;
  return `${out}\n`;
}

/**
 * A `ReadableStream` of server-sent events and its writer. The client closing the connection
 * closes the stream and calls `onClose`; nothing else happens: a run the stream was watching
 * goes on (stopping is a request of its own). A client that leaves more than
 * `maxBufferedBytes` unread is cut off the same way.
 */
export function sseStream(options: SseStreamOptions): {
  body: ReadableStream<Uint8Array>;
  writer: SseWriter;
} {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let closed = false;
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  const finish = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    options.onClose();
  };
  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        heartbeat = setInterval(() => enqueue(": keep-alive\n\n"), options.heartbeatMs);
        heartbeat.unref?.();
      },
      cancel() {
        finish();
      },
    },
    { highWaterMark: options.maxBufferedBytes, size: (chunk) => chunk.byteLength },
  );
  const enqueue = (text: string): boolean => {
    if (closed) return false;
    controller.enqueue(encoder.encode(text));
    if ((controller.desiredSize ?? 0) < 0) {
      writer.close();
      return false;
    }
    return true;
  };
  const writer: SseWriter = {
    write: (event) => enqueue(encodeSse(event)),
    close() {
      if (closed) return;
      finish();
      controller.close();
    },
    get closed() {
      return closed;
    },
  };
  return { body, writer };
}
