// Splitting a byte stream into NDJSON frames, bounded. Pure (no I/O): both ends of the control
// protocol feed it the chunks their stream gives them.

/** What one line of input turned out to be. */
export type LineResult =
  | { type: "frame"; frame: Record<string, unknown> }
  | {
      type: "bad";
      code: "FRAME_TOO_LARGE" | "INVALID_UTF8" | "INVALID_JSON" | "INVALID_FRAME";
      message: string;
      /**
       * The frame's `id`, when it parsed as an object with one; for a line too large, the
       * top-level `id` read from its head (when it comes before the bound).
       */
      id?: unknown;
      /** For a line too large: the top-level `type` read from its head, when there. */
      frameType?: string;
    };

/** How much of an oversized line's head is read for its `type` and `id`. */
const HEAD_BYTES = 64 * 1024;

const NEWLINE = 0x0a;

/**
 * Cuts chunks of bytes into lines at `\n` and decodes each as one JSON object. A line longer
 * than `maxBytes` is reported once (`FRAME_TOO_LARGE`) and skipped up to its newline without
 * being held in memory; invalid UTF-8, invalid JSON and non-objects are reported per line.
 * Blank lines are ignored; a trailing `\r` is dropped. `end()` accepts a last line without a
 * newline only when it is complete JSON. Cost: each byte is scanned once.
 */
export class LineDecoder {
  private readonly maxBytes: number;
  private readonly utf8 = new TextDecoder("utf-8", { fatal: true });
  private parts: Uint8Array[] = [];
  private size = 0;
  /** Inside a line already reported too large: drop bytes up to the next newline. */
  private skipping = false;

  constructor(maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 2) {
      throw new RangeError(`LineDecoder: maxBytes must be an integer ≥ 2, got ${maxBytes}`);
    }
    this.maxBytes = maxBytes;
  }

  /** Feeds one chunk; returns what the lines it completed were, in order. */
  push(chunk: Uint8Array): LineResult[] {
    const out: LineResult[] = [];
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start);
      const end = nl === -1 ? chunk.length : nl;
      if (!this.skipping) {
        if (this.size + (end - start) > this.maxBytes + 1) {
          // +1: a "\r" before the newline does not count against the bound.
          this.parts.push(chunk.subarray(start, Math.min(end, start + HEAD_BYTES)));
          this.size += Math.min(end - start, HEAD_BYTES);
          out.push({ ...this.tooLarge(), ...headFields(this.head()) });
          this.skipping = true;
          this.parts = [];
          this.size = 0;
        } else if (end > start) {
          this.parts.push(chunk.subarray(start, end));
          this.size += end - start;
        }
      }
      if (nl === -1) break;
      if (this.skipping) this.skipping = false;
      else {
        const line = this.take();
        const result = this.decode(line, false);
        if (result) out.push(result);
      }
      start = nl + 1;
    }
    return out;
  }

  /** The input ended: the last line without a newline, if any. */
  end(): LineResult[] {
    if (this.skipping) {
      this.skipping = false;
      return [];
    }
    const line = this.take();
    const result = this.decode(line, true);
    return result ? [result] : [];
  }

  /** Bytes held for the line in progress. */
  get buffered(): number {
    return this.size;
  }

  /** The first `HEAD_BYTES` of the line in progress, as text (a cut character dropped). */
  private head(): string {
    const bytes = new Uint8Array(Math.min(this.size, HEAD_BYTES));
    let at = 0;
    for (const part of this.parts) {
      if (at >= bytes.length) break;
      const piece = part.subarray(0, bytes.length - at);
      bytes.set(piece, at);
      at += piece.length;
    }
    return new TextDecoder("utf-8").decode(bytes);
  }

  private take(): Uint8Array {
    let line: Uint8Array;
    if (this.parts.length === 1) line = this.parts[0];
    else {
      line = new Uint8Array(this.size);
      let at = 0;
      for (const part of this.parts) {
        line.set(part, at);
        at += part.length;
      }
    }
    this.parts = [];
    this.size = 0;
    return line;
  }

  private tooLarge(): LineResult {
    return {
      type: "bad",
      code: "FRAME_TOO_LARGE",
      message: `a line is longer than ${this.maxBytes} bytes (the frame bound); it was skipped up to its newline. Send smaller frames or start the server with a larger --max-frame-bytes.`,
    };
  }

  private decode(bytes: Uint8Array, last: boolean): LineResult | undefined {
    let length = bytes.length;
    if (length > 0 && bytes[length - 1] === 0x0d) length--;
    if (length > this.maxBytes) return this.tooLarge();
    let text: string;
    try {
      text = this.utf8.decode(bytes.subarray(0, length));
    } catch {
      return {
        type: "bad",
        code: "INVALID_UTF8",
        message: `a line of ${length} bytes is not valid UTF-8; frames are UTF-8 JSON, one per line`,
      };
    }
    if (text.trim() === "") return undefined;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      const shown = text.length > 200 ? `${text.slice(0, 200)}…` : text;
      return {
        type: "bad",
        code: "INVALID_JSON",
        message: last
          ? `the last line has no newline and is not complete JSON (${(err as Error).message}): ${shown}`
          : `a line is not JSON (${(err as Error).message}): ${shown}`,
      };
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return {
        type: "bad",
        code: "INVALID_FRAME",
        message: `a frame must be a JSON object with a "type", got ${Array.isArray(value) ? "an array" : JSON.stringify(value)}`,
      };
    }
    return { type: "frame", frame: value as Record<string, unknown> };
  }
}

/**
 * The top-level `"type"` and `"id"` of a JSON object's first characters, when they come before
 * the text ends: a scan that tracks strings and nesting, so an `"id"` inside a nested value is
 * never taken for the frame's. Linear in `text`. This is a pure function.
 */
export function headFields(text: string): { id?: unknown; frameType?: string } {
  const out: { id?: unknown; frameType?: string } = {};
  let depth = 0;
  let i = 0;
  let key: string | undefined;
  let expectKey = false;
  const readString = (): string | undefined => {
    let j = i + 1;
    let value = "";
    while (j < text.length) {
      const c = text[j];
      if (c === "\\") {
        j += 2;
        value += "?"; // escapes never occur in the ids and types read here
        continue;
      }
      if (c === '"') {
        i = j + 1;
        return value;
      }
      value += c;
      j++;
    }
    i = text.length;
    return undefined;
  };
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      const start = i;
      const str = readString();
      if (str === undefined) break;
      if (depth === 1 && expectKey) {
        key = str;
        expectKey = false;
      } else if (depth === 1 && key !== undefined) {
        if (key === "type") out.frameType = str;
        if (key === "id") out.id = JSON.parse(text.slice(start, i));
        key = undefined;
      }
      continue;
    }
    if (c === "{" || c === "[") {
      depth++;
      if (depth === 1) expectKey = true;
      key = depth === 2 ? undefined : key;
    } else if (c === "}" || c === "]") depth--;
    else if (c === "," && depth === 1) {
      expectKey = true;
      key = undefined;
    } else if (depth === 1 && key === "id" && (c === "-" || (c >= "0" && c <= "9"))) {
      const m = /^-?\d+/.exec(text.slice(i, i + 32));
      if (m) out.id = Number(m[0]);
      key = undefined;
    }
    i++;
  }
  return out;
}
