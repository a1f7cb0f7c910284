import { HttpError } from "./http-error.ts";

/**
 * The request's body as a JSON object, read up to `maxBytes` and no further: a longer body is
 * refused (413) as soon as the bound is crossed, whether or not it declared a `content-length`.
 * An empty body is `{}`. Throws `HttpError` `INVALID_BODY` for text that is not a JSON object.
 */
export async function readJsonBody(
  request: Request,
  maxBytes: number,
): Promise<Record<string, unknown>> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > maxBytes) throw tooLarge(maxBytes);
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body) {
    const reader = request.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => {});
        throw tooLarge(maxBytes);
      }
      chunks.push(value);
    }
  }
  if (size === 0) return {};
  const text = new TextDecoder("utf-8", { fatal: false }).decode(Buffer.concat(chunks));
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new HttpError(
      400,
      "INVALID_BODY",
      `the body is not JSON (${(error as Error).message}); send a JSON object with content-type application/json`,
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new HttpError(
      400,
      "INVALID_BODY",
      'the body must be a JSON object, e.g. {"text":"hello"}',
    );
  }
  return value as Record<string, unknown>;
}

const tooLarge = (maxBytes: number) =>
  new HttpError(
    413,
    "BODY_TOO_LARGE",
    `the body is over ${maxBytes} bytes (createHttpHandler's maxBodyBytes, \`keel serve --max-body-bytes\`); send less`,
  );

/** The non-empty string `body[field]`, or an `INVALID_BODY` error naming it. */
export function textField(body: Record<string, unknown>, field: string, route: string): string {
  const v = body[field];
  if (typeof v !== "string" || v.length === 0) {
    const got = v === undefined ? "it is missing" : `got ${JSON.stringify(v)}`;
    throw new HttpError(
      400,
      "INVALID_BODY",
      `${route}: "${field}" must be a non-empty string; ${got}`,
    );
  }
  return v;
}
