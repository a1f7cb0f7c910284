import type {
  ControlMap,
  ControlType,
  ErrorFrame,
  OkFrame,
  ServerFrame,
} from "../../contracts/protocol.ts";

/** Why a control request got no usable answer. `kind` tells the caller what to make of it. */
export class ControlFailure extends Error {
  override readonly name = "ControlFailure";
  constructor(
    readonly kind: "timeout" | "closed" | "remote" | "withdrawn",
    message: string,
    /** With `remote`: the code of the client's `error` frame. */
    readonly code?: string,
  ) {
    super(message);
  }
}

interface Pending {
  type: ControlType;
  sessionId: string;
  resolve: (result: unknown) => void;
  reject: (error: ControlFailure) => void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * The requests Keel sends the client (`permission.request`, `tool.execute`), each with an id
 * (`k1`, `k2`, …) and a timeout. Each ends exactly once: the client's `ok`/`error` reply, the
 * timeout, a withdrawal, or `failAll` when the connection ends; whatever comes later is a
 * `LATE_REPLY` error frame and changes nothing.
 */
export class ControlChannel {
  private readonly send: (frame: ServerFrame) => void;
  private readonly pending = new Map<string, Pending>();
  private seq = 0;
  private closedReason: string | undefined;

  /** Contract of `send`: must not throw. */
  constructor(send: (frame: ServerFrame) => void) {
    this.send = send;
  }

  /** Sends a control request; resolves with the `ok` result, rejects with a `ControlFailure`. */
  request<K extends ControlType>(
    type: K,
    params: ControlMap[K]["params"],
  ): { id: string; result: Promise<unknown> } {
    const id = `k${++this.seq}`;
    if (this.closedReason) {
      return { id, result: Promise.reject(new ControlFailure("closed", this.closedReason)) };
    }
    const result = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.send({ type: "cancel", id, reason: `timed out after ${params.timeoutMs} ms` });
        reject(
          new ControlFailure(
            "timeout",
            `the client did not answer ${type} ${id} within ${params.timeoutMs} ms`,
          ),
        );
      }, params.timeoutMs);
      timer.unref();
      this.pending.set(id, { type, sessionId: params.sessionId, resolve, reject, timer });
    });
    this.send({ type, id, ...params } as ServerFrame);
    return { id, result };
  }

  /** Applies the client's reply. A reply for no waiting request gets a `LATE_REPLY` frame. */
  settle(frame: OkFrame | ErrorFrame): void {
    const id = String(frame.id);
    const entry = this.pending.get(id);
    if (!entry) {
      this.send({
        type: "error",
        ref: id,
        code: "LATE_REPLY",
        message: `no control request ${id} is waiting: it timed out, was withdrawn or answered already, so this reply changes nothing`,
      });
      return;
    }
    clearTimeout(entry.timer);
    this.pending.delete(id);
    if (frame.type === "ok") entry.resolve(frame.result);
    else {
      entry.reject(
        new ControlFailure(
          "remote",
          `the client answered ${entry.type} ${id} with ${frame.code}: ${frame.message}`,
          frame.code,
        ),
      );
    }
  }

  /**
   * Ends `id` now as answered with an error (e.g. its reply was too large to read): it fails
   * with `remote` and `code`, as an `error` reply would. A request no longer waiting is left.
   */
  fail(id: string, message: string, code: string): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.pending.delete(id);
    entry.reject(new ControlFailure("remote", message, code));
  }

  /** Asks the client to abort `id` (the call was cancelled); the request keeps waiting. */
  notifyCancel(id: string, reason: string): void {
    if (this.pending.has(id)) this.send({ type: "cancel", id, reason });
  }

  /** Ends `id` now (its answer no longer matters) and tells the client with a `cancel` frame. */
  withdraw(id: string, reason: string): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.pending.delete(id);
    this.send({ type: "cancel", id, reason });
    entry.reject(new ControlFailure("withdrawn", reason));
  }

  /** Waiting requests of one session (ids and types). */
  waiting(sessionId?: string): { id: string; type: ControlType }[] {
    return [...this.pending]
      .filter(([, p]) => sessionId === undefined || p.sessionId === sessionId)
      .map(([id, p]) => ({ id, type: p.type }));
  }

  /** Fails every waiting request at once with `reason`; later requests fail at once too. */
  failAll(reason: string): void {
    this.closedReason ??= reason;
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) {
      clearTimeout(p.timer);
      p.reject(new ControlFailure("closed", reason));
    }
  }
}
