/** Bytes of `text` encoded as UTF-8 (a lone surrogate counts as the 3 bytes of U+FFFD). */
export function utf8Length(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * The longest prefix of `text` whose UTF-8 encoding fits in `maxBytes`, never splitting a
 * character (a surrogate pair is kept whole or dropped whole). Reads at most `maxBytes`
 * characters of the input, so a 1 MB text costs no more than its prefix. Pure.
 */
export function truncateUtf8(
  text: string,
  maxBytes: number,
): { text: string; bytes: number; cut: boolean } {
  const limit = Math.max(0, Math.floor(maxBytes));
  // A UTF-16 code unit encodes to at most 3 bytes, so this prefix always fits.
  if (text.length * 3 <= limit) return { text, bytes: utf8Length(text), cut: false };
  let bytes = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    let size: number;
    let units = 1;
    if (c < 0x80) size = 1;
    else if (c < 0x800) size = 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        size = 4;
        units = 2;
      } else size = 3;
    } else size = 3;
    if (bytes + size > limit) break;
    bytes += size;
    i += units;
  }
  return { text: i === n ? text : text.slice(0, i), bytes, cut: i < n };
}

/**
 * The longest suffix of `text` whose UTF-8 encoding fits in `maxBytes`, never splitting a
 * character. Pure.
 */
export function truncateUtf8Start(text: string, maxBytes: number): { text: string; bytes: number } {
  let bytes = 0;
  let i = text.length;
  while (i > 0) {
    const c = text.charCodeAt(i - 1);
    let size = c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    let units = 1;
    if (c >= 0xdc00 && c <= 0xdfff && i > 1) {
      const h = text.charCodeAt(i - 2);
      if (h >= 0xd800 && h <= 0xdbff) {
        size = 4;
        units = 2;
      }
    }
    if (bytes + size > maxBytes) break;
    bytes += size;
    i -= units;
  }
  return { text: text.slice(i), bytes };
}
