import type { RequestId } from "../contracts/protocol.ts";

/** The server answered a request with an `error` frame. */
export class KeelRequestError extends Error {
  override readonly name = "KeelRequestError";
  constructor(
    /** The protocol code (`UNKNOWN_SESSION`, `REFUSED`, `SHUTTING_DOWN`, …). */
    readonly code: string,
    message: string,
    readonly id: RequestId,
    /** With `REFUSED`: the library's refusal code (`TURN_OPEN`, `UNKNOWN_REQUEST`, …). */
    readonly refusal?: string,
  ) {
    super(message);
  }
}

/**
 * The connection ended (the server exited, its stdout ended, writing to it failed, or
 * `close()`): every pending request rejects at once with this error and the one terminal
 * `reason`; later requests reject with it too.
 */
export class KeelConnectionError extends Error {
  override readonly name = "KeelConnectionError";
  readonly code = "CONNECTION_CLOSED";
  constructor(readonly reason: string) {
    super(`the Keel connection is closed: ${reason}`);
  }
}
