// The error side of the AI SDK adapter (`aiSdkModel` in ai-sdk-model.ts): what a failed
// request, a broken body, an `error` stream part, a timeout or the caller's abort becomes as a
// `ModelError` the retry policy reads unchanged. A leaf of its own so the stream mapper
// (ai-sdk-stream.ts) and the adapter share one mapping without importing each other.
import { APICallError, TypeValidationError } from "@ai-sdk/provider";
import type { ModelErrorKind } from "../contracts/model.ts";
import { ModelError, watchdogError } from "../contracts/model.ts";

/** An `error` stream part: the provider's error object (or an APICallError) as a ModelError. */
export function inStreamError(error: unknown): ModelError {
  if (APICallError.isInstance(error)) return fromApiCallError(error);
  const wire = wireMismatch(error);
  if (wire) return wire;
  if (error instanceof ModelError) return error;
  const e = (typeof error === "object" && error !== null ? error : {}) as Record<string, unknown>;
  const inner = (typeof e.error === "object" && e.error !== null ? e.error : e) as Record<
    string,
    unknown
  >;
  const str = (v: unknown) =>
    typeof v === "string" ? v : typeof v === "number" ? String(v) : undefined;
  const message =
    str(inner.message) ?? (error instanceof Error ? error.message : JSON.stringify(error));
  return new ModelError(`the provider sent an error inside the stream: ${message}`, {
    kind: "http",
    code: str(inner.code),
    type: str(inner.type) ?? str(inner.status),
    body: error,
    cause: error,
  });
}

/** An `APICallError` with its status, lowercased headers, parsed body and the provider's code/type. */
function fromApiCallError(err: APICallError): ModelError {
  const wire = wireMismatch(err);
  if (wire) return wire;
  if (err.statusCode === undefined || err.statusCode < 400) {
    // No status: the connection failed. A 2xx: the response began and its body broke.
    const cause = err.cause as { message?: string; cause?: { code?: string } } | undefined;
    const detail = [cause?.message, cause?.cause?.code].filter(Boolean).join(": ");
    const origin = URL.canParse(err.url) ? new URL(err.url).origin : err.url;
    return new ModelError(
      `${err.message.replace(/\.$/, "")} to ${origin}${detail ? ` (${detail})` : ""}`,
      {
        kind: err.statusCode === undefined ? "network" : "stream_cut",
        cause: err,
      },
    );
  }
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(err.responseHeaders ?? {})) headers[k.toLowerCase()] = v;
  let body: unknown = err.data;
  if (body === undefined && err.responseBody !== undefined) {
    try {
      body = JSON.parse(err.responseBody);
    } catch {
      body = err.responseBody;
    }
  }
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const inner = (typeof b.error === "object" && b.error !== null ? b.error : b) as Record<
    string,
    unknown
  >;
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  return new ModelError(err.message, {
    kind: "http",
    status: err.statusCode,
    headers,
    code: str(inner.code),
    // Gemini puts its code name in `status` (e.g. "RESOURCE_EXHAUSTED").
    type: str(inner.type) ?? str(inner.status),
    body,
    providerRetryable: err.isRetryable,
    cause: err,
  });
}

/**
 * A reply the provider package could not read as its wire format: a `TypeValidationError` of a
 * chunk, or an `APICallError` raised on a response that arrived (no status, a body, not
 * retryable: e.g. a Chat Completions stream to the Responses API). One line saying what was
 * received and what to do, never the validator's issue list; `wire_mismatch`, not retried.
 */
function wireMismatch(error: unknown): ModelError | undefined {
  const api = APICallError.isInstance(error) ? error : undefined;
  const validation = TypeValidationError.isInstance(error)
    ? error
    : TypeValidationError.isInstance(api?.cause)
      ? api.cause
      : undefined;
  const answered =
    api !== undefined &&
    api.statusCode === undefined &&
    api.responseBody !== undefined &&
    !api.isRetryable;
  if (validation === undefined && !answered) return undefined;
  const said = api ? firstSentence(api.message) : undefined;
  const fix = /chat completions/i.test(api?.message ?? "")
    ? "a Chat Completions server takes openaiModel (keel: --provider openai-compatible)"
    : "check that the base URL serves this provider's API";
  const what =
    said ?? `the server's reply is not this provider's wire format (${firstIssue(validation)})`;
  return new ModelError(`${what}: ${fix}`, { kind: "wire_mismatch", cause: error });
}

/** The first sentence of a message, on one line. */
function firstSentence(message: string): string {
  const line = message.split("\n", 1)[0] ?? "";
  const end = line.search(/\.(\s|$)/);
  return (end > 0 ? line.slice(0, end) : line).slice(0, 200);
}

/** The first problem a validation error found: where, and what. */
function firstIssue(error: TypeValidationError | undefined): string {
  const issues = (error?.cause as { issues?: { path?: PropertyKey[]; message?: string }[] })
    ?.issues;
  const first = issues?.[0];
  if (!first) return firstSentence(error?.message ?? "unreadable reply");
  const path = (first.path ?? []).map(String).join(".");
  return `${path ? `${path}: ` : ""}${first.message ?? "invalid"}`.slice(0, 200);
}

/**
 * Any failure of one request as a `ModelError`: a timeout of the watchdog or the caller's abort
 * first (whatever error they caused), then an `APICallError` as read by `fromApiCallError`, else
 * `stream_cut` in the body phase and `network` before it.
 */
export function toModelError(
  err: unknown,
  phase: "connect" | "body",
  timedOut: { kind: ModelErrorKind; ms: number } | undefined,
  abortReason: unknown,
): ModelError {
  if (timedOut) return watchdogError(timedOut, err);
  if (abortReason !== undefined)
    return new ModelError("the request was aborted by the caller", {
      kind: "aborted",
      cause: abortReason,
    });
  if (err instanceof ModelError) return err;
  if (APICallError.isInstance(err)) return fromApiCallError(err);
  const message = err instanceof Error ? err.message : String(err);
  const cause = (err as { cause?: { message?: string } } | undefined)?.cause?.message;
  return new ModelError(
    phase === "body"
      ? `the stream was cut: ${message}${cause ? ` (${cause})` : ""}`
      : `request failed: ${message}${cause ? ` (${cause})` : ""}`,
    { kind: phase === "body" ? "stream_cut" : "network", cause: err },
  );
}
