/**
 * The HTTP response of one UI message stream (the AI SDK's protocol: server-sent events, each
 * `data:` one `UIMessageChunk` as JSON, `data: [DONE]` last, header
 * `x-vercel-ai-ui-message-stream: v1`). It writes a turn's chunks from `from`, then the new ones
 * as they come, and ends when the turn's message ends, or when the turn waits for a person's
 * approval and nothing else comes for `quietMs` (the AI SDK's client sends the approval as a
 * new request, which continues the same message). A client that goes away stops only its own
 * stream: the turn runs on.
 */
import type { Session } from "../actors/session.ts";
import { sseStream } from "./sse-stream.ts";
import type { UiChunk } from "./ui-chunks.ts";
import type { UiTurn } from "./ui-turns.ts";

/** The headers of every UI message stream response. */
export const UI_STREAM_HEADERS: Record<string, string> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no",
  "x-vercel-ai-ui-message-stream": "v1",
};

/** Options of {@link uiStreamResponse}. */
export interface UiStreamOptions {
  /** The turn, or a promise of it (the turn that will consume a just-submitted input). */
  turn: UiTurn | Promise<UiTurn>;
  session: Session;
  /** The index of the first chunk to write (0: the whole message from its `start`). */
  from: number | "now";
  /** Writes a `start` chunk first (a continuation that does not begin at 0 needs one). */
  start: boolean;
  /** How long a turn that waits for an approval stays quiet before the response ends (ms). */
  quietMs: number;
  heartbeatMs: number;
  maxBufferedBytes: number;
  headers: Record<string, string>;
}

/** See the file's comment. */
export function uiStreamResponse(options: UiStreamOptions): Response {
  let stop: (() => void) | undefined;
  let quiet: ReturnType<typeof setTimeout> | undefined;
  const { body, writer } = sseStream({
    heartbeatMs: options.heartbeatMs,
    maxBufferedBytes: options.maxBufferedBytes,
    onClose: () => {
      stop?.();
      clearTimeout(quiet);
    },
  });
  const write = (chunk: UiChunk) => writer.write({ data: JSON.stringify(chunk) });
  const end = (pause: boolean) => {
    if (pause) write({ type: "finish" });
    writer.write({ data: "[DONE]" });
    writer.close();
  };
  // Whenever the turn has been quiet for `quietMs` while a permission request waits, the
  // response ends (one timer, re-armed by every chunk).
  const pauseIfWaiting = () => {
    options.session.pendingPermissions().then(
      (waiting) => {
        if (waiting.length > 0) end(true);
      },
      () => {}, // a store that cannot be read now: the next quiet spell asks again
    );
  };
  const after = (chunk: UiChunk, turn: UiTurn) => {
    // The turn's last chunk (its `finish`, `abort` or `error`) ends the message.
    if (turn.ended && chunk === turn.chunks.at(-1)) return end(false);
    if (quiet) quiet.refresh();
    else quiet = setTimeout(pauseIfWaiting, options.quietMs);
  };
  void Promise.resolve(options.turn).then((turn) => {
    if (writer.closed) return;
    const first = options.from === "now" ? turn.chunks.length : options.from;
    if (options.start) write({ type: "start", messageId: turn.turnId });
    const past = turn.chunks.slice(first);
    for (const chunk of past) write(chunk);
    if (turn.ended) return end(false);
    quiet = setTimeout(pauseIfWaiting, options.quietMs);
    stop = turn.follow((chunk) => {
      if (writer.closed) return;
      write(chunk);
      after(chunk, turn);
    });
  });
  return new Response(body, { status: 200, headers: { ...UI_STREAM_HEADERS, ...options.headers } });
}
