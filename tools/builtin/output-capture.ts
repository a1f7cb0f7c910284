/**
 * Keeps the first and last `keepBytes` of a byte stream and counts the rest, so a command that
 * prints gigabytes costs bounded memory. Rendering never splits a UTF-8 character.
 */
export class OutputCapture {
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  /** Every byte written, kept or not. */
  total = 0;

  constructor(private readonly keepBytes: number) {}

  write(chunk: Buffer): void {
    this.total += chunk.length;
    let rest = chunk;
    if (this.headBytes < this.keepBytes) {
      const take = Math.min(rest.length, this.keepBytes - this.headBytes);
      this.head.push(rest.subarray(0, take));
      this.headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0) return;
    this.tail.push(rest);
    this.tailBytes += rest.length;
    while (this.tailBytes - this.tail[0].length >= this.keepBytes)
      this.tailBytes -= this.tail.shift()!.length;
  }

  /**
   * The output within `maxBytes`: whole if it fits and was fully kept, else the head and the
   * tail (half each) around a note of how many bytes were omitted.
   */
  render(maxBytes: number): { text: string; omitted: number } {
    const head = Buffer.concat(this.head);
    const tail = Buffer.concat(this.tail);
    if (this.total <= maxBytes && this.total === head.length + tail.length) {
      return { text: Buffer.concat([head, tail]).toString("utf8"), omitted: 0 };
    }
    const half = Math.max(0, Math.floor(maxBytes / 2) - 40);
    const all = tail.length === 0 ? head : Buffer.concat([head, tail]);
    const headEnd = charBoundary(all, Math.min(half, head.length));
    let tailStart = Math.max(headEnd, all.length - half);
    while (tailStart < all.length && (all[tailStart] & 0xc0) === 0x80) tailStart++;
    const omitted = this.total - headEnd - (all.length - tailStart);
    const text = `${all.subarray(0, headEnd).toString("utf8")}\n[… ${omitted} bytes omitted …]\n${all.subarray(tailStart).toString("utf8")}`;
    return { text, omitted };
  }
}

/** The largest index ≤ `end` that does not fall inside a UTF-8 sequence. */
function charBoundary(buf: Buffer, end: number): number {
  let i = end;
  while (i > 0 && i < buf.length && (buf[i] & 0xc0) === 0x80) i--;
  return i;
}
