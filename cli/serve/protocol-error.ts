import type { ProtocolErrorCode } from "../../contracts/protocol.ts";

/** A request the server will not do: becomes an `error` frame with this code and message. */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
  constructor(
    readonly code: ProtocolErrorCode,
    message: string,
    /** With `REFUSED`: the library's refusal code. */
    readonly refusal?: string,
  ) {
    super(message);
  }
}
