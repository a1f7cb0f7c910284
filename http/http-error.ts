/**
 * The HTTP transport's one failure shape: a JSON body `{ error: { code, message } }` with a
 * status, the `code` stable and machine-readable, the `message` saying what was wrong and how
 * to fix it (docs/web-apps.md lists the codes).
 */

/** Every `code` an error response of the HTTP transport carries. */
export type HttpErrorCode =
  /** No bearer token, or the wrong one (401). */
  | "UNAUTHORIZED"
  /** The browser's `Origin` is not in `cors.origins` (403). */
  | "ORIGIN_NOT_ALLOWED"
  /** No route for this method and path (404). */
  | "NOT_FOUND"
  /** The route exists, the method does not (405). */
  | "METHOD_NOT_ALLOWED"
  /** The body is over `maxBodyBytes` (413). */
  | "BODY_TOO_LARGE"
  /** The body is not JSON, or not the JSON the route needs (400). */
  | "INVALID_BODY"
  /** A `Last-Event-ID` that is not an id this server wrote (400). */
  | "INVALID_EVENT_ID"
  /** The session refused the request (409), e.g. `UNKNOWN_REQUEST` for a permission reply. */
  | "REFUSED"
  /** The server failed (500); the message says what failed. */
  | "INTERNAL";

/** A request the handler will not do: becomes a JSON error response. */
export class HttpError extends Error {
  override readonly name = "HttpError";
  constructor(
    readonly status: number,
    readonly code: HttpErrorCode,
    message: string,
    /** With `REFUSED`: the library's refusal code (e.g. `UNKNOWN_REQUEST`). */
    readonly refusal?: string,
  ) {
    super(message);
  }
}

/** The JSON response of `error` (a non-`HttpError` is a 500 `INTERNAL`), with `headers`. */
export function errorResponse(error: unknown, headers: Record<string, string> = {}): Response {
  const e =
    error instanceof HttpError
      ? error
      : new HttpError(500, "INTERNAL", `the request failed: ${(error as Error)?.message ?? error}`);
  const body = {
    error: { code: e.code, message: e.message, ...(e.refusal ? { refusal: e.refusal } : {}) },
  };
  return Response.json(body, {
    status: e.status,
    headers: { "cache-control": "no-store", ...headers },
  });
}
