import { ModelError } from "../contracts/model.ts";

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * Longest SSE line accepted from a provider (bytes). Lines are passed to the SDK whole, so any
 * length costs linear time; past this bound the stream fails with a `protocol` error naming it
 * instead of buffering without end.
 */
export const MAX_SSE_LINE_BYTES = 64 * 1024 * 1024;

/**
 * Wraps the `fetch` the `openai` SDK uses, to read what providers really send:
 * - **SSE lines whole.** The SDK's line decoder concatenates its whole buffer on every chunk
 *   and rescans it from the start, so one long line (a megabyte argument in one `data:` line)
 *   arriving in many network chunks is quadratic. The body is re-chunked at line ends: the SDK
 *   sees each line in one piece. A line over `maxLineBytes` fails the stream with a clear
 *   error (never a timeout).
 * - **Error bodies without the `error` wrapper** (vLLM, some proxies: `{ "object": "error",
 *   "message": … }`, or `{ "detail": … }`) are wrapped as `{ error: { message, type, code } }`,
 *   so the SDK keeps their text instead of "400 status code (no body)".
 * - **A non-streamed JSON 200 reply** to a streaming request (servers that ignore `stream`) is
 *   turned into the equivalent SSE stream (one chunk with the message, its finish reason and
 *   usage, then `[DONE]`); a JSON 200 that holds an error becomes that HTTP error.
 * Contract: resolves like `fetch`; never reads a body it does not rewrite.
 */
export function providerFetch(inner: Fetch, maxLineBytes = MAX_SSE_LINE_BYTES): Fetch {
  return async (input, init) => {
    const response = await inner(input, init);
    const type = response.headers.get("content-type") ?? "";
    if (!response.ok) {
      if (!type.includes("json")) return response;
      const text = await response.text();
      return rebuilt(response, wrapError(text), response.status);
    }
    if (type.includes("text/event-stream") && response.body) {
      return rebuiltStream(response, wholeLines(response.body, maxLineBytes));
    }
    if (type.includes("json") && streaming(init)) {
      const text = await response.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return rebuilt(response, text, response.status);
      }
      const b = body as Record<string, unknown>;
      if (b && (b.error !== undefined || b.object === "error")) {
        const code = Number((b.error as { code?: unknown } | undefined)?.code ?? b.code);
        const status = code >= 400 && code <= 599 ? code : 502;
        return rebuilt(response, wrapError(text), status);
      }
      if (Array.isArray(b?.choices)) {
        const headers = new Headers(response.headers);
        headers.set("content-type", "text/event-stream");
        return new Response(`data: ${JSON.stringify(asChunk(b))}\n\ndata: [DONE]\n\n`, {
          status: 200,
          headers,
        });
      }
      return rebuilt(response, text, response.status);
    }
    return response;
  };
}

function streaming(init: RequestInit | undefined): boolean {
  try {
    return typeof init?.body === "string" && JSON.parse(init.body).stream === true;
  } catch {
    return false;
  }
}

function rebuilt(response: Response, body: string, status: number): Response {
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  headers.delete("content-encoding");
  return new Response(body, { status, statusText: response.statusText, headers });
}

function rebuiltStream(response: Response, body: ReadableStream<Uint8Array>): Response {
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** An error body in the `{ error: { message, … } }` shape the SDK reads; other shapes wrapped. */
export function wrapError(text: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return text;
  }
  if (body === null || typeof body !== "object") return text;
  const b = body as Record<string, unknown>;
  if (b.error !== undefined && typeof b.error === "object" && b.error !== null) return text;
  const message =
    typeof b.message === "string"
      ? b.message
      : typeof b.error === "string"
        ? b.error
        : typeof b.detail === "string"
          ? b.detail
          : JSON.stringify(b).slice(0, 2000);
  return JSON.stringify({
    error: {
      message,
      type: typeof b.type === "string" ? b.type : undefined,
      code: b.code === undefined ? undefined : String(b.code),
      param: b.param,
    },
  });
}

/** A non-streamed chat completion as the one streamed chunk that carries the same reply. */
function asChunk(b: Record<string, unknown>): Record<string, unknown> {
  const choices = (b.choices as Record<string, unknown>[]).map((choice, i) => {
    const message = (choice.message ?? {}) as Record<string, unknown>;
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    return {
      index: typeof choice.index === "number" ? choice.index : i,
      delta: {
        role: "assistant",
        ...(typeof message.content === "string" || Array.isArray(message.content)
          ? { content: message.content }
          : {}),
        ...(typeof message.reasoning_content === "string"
          ? { reasoning_content: message.reasoning_content }
          : {}),
        ...(typeof message.reasoning === "string" ? { reasoning: message.reasoning } : {}),
        ...(typeof message.refusal === "string" ? { refusal: message.refusal } : {}),
        ...(calls.length > 0
          ? {
              tool_calls: calls.map((c: Record<string, unknown>, index: number) => ({
                index,
                id: c.id,
                type: "function",
                function: c.function,
              })),
            }
          : {}),
      },
      finish_reason: choice.finish_reason ?? null,
    };
  });
  return {
    id: b.id,
    object: "chat.completion.chunk",
    created: b.created,
    model: b.model,
    choices,
    ...(b.usage ? { usage: b.usage } : {}),
  };
}

/**
 * Re-chunks a byte stream so every chunk ends at a line end (`\n` or `\r`); the partial line
 * is held. Linear: each byte is copied once into its line. A line longer than `max` errors the
 * stream with a `protocol` ModelError saying so.
 */
export function wholeLines(
  body: ReadableStream<Uint8Array>,
  max: number,
): ReadableStream<Uint8Array> {
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  const joined = (parts: Uint8Array[], total: number) => {
    if (parts.length === 1) return parts[0];
    const out = new Uint8Array(total);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  };
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const tooLong = () =>
          controller.error(
            new ModelError(
              `the provider sent an SSE line longer than ${max} bytes (the limit, MAX_SSE_LINE_BYTES); the stream was stopped. A single streamed chunk that large is not a valid Chat Completions stream`,
              { kind: "protocol" },
            ),
          );
        let end = chunk.length - 1;
        while (end >= 0 && chunk[end] !== 0x0a && chunk[end] !== 0x0d) end--;
        if (end < 0) {
          held.push(chunk);
          heldBytes += chunk.length;
          if (heldBytes > max) tooLong();
          return;
        }
        // Every line this chunk completes is checked, the one the held bytes begin included (a
        // line of max + 130 bytes whose end came in the last chunk was accepted).
        let start = 0;
        let carried = heldBytes;
        for (let i = 0; i <= end; i++) {
          if (chunk[i] !== 0x0a && chunk[i] !== 0x0d) continue;
          if (carried + (i - start) > max) return tooLong();
          carried = 0;
          start = i + 1;
        }
        const rest = chunk.subarray(end + 1);
        if (rest.length > max) return tooLong();
        const head = chunk.subarray(0, end + 1);
        controller.enqueue(joined([...held, head], heldBytes + head.length));
        held = rest.length > 0 ? [rest] : [];
        heldBytes = rest.length;
      },
      flush(controller) {
        if (heldBytes > 0) controller.enqueue(joined(held, heldBytes));
      },
    }),
  );
}
