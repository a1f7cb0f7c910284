/** Where and why a JSON text is not valid. `offset` is a UTF-16 index into the text. */
export interface JsonSyntaxError {
  offset: number;
  reason: string;
}

export type ScanResult = { ok: true; end: number } | { ok: false; error: JsonSyntaxError };

const OBJECT = 1;
const ARRAY = 2;

/**
 * Scans one complete JSON value (RFC 8259) starting at `start` (leading whitespace allowed) and
 * returns the index just past it, or the first syntax error. Iterative with an explicit stack,
 * so 100 000 levels of nesting cost memory, not call stack; linear in the text length. It only
 * locates errors and value boundaries: `JSON.parse` still builds the values. Pure.
 */
export function scanJsonValue(text: string, start: number): ScanResult {
  const stack: number[] = [];
  let i = skipWs(text, start);
  const n = text.length;
  const fail = (offset: number, reason: string): ScanResult => ({
    ok: false,
    error: { offset, reason },
  });

  // One pass per value start: open a container (its first element follows) or scan a scalar,
  // then close what that value finished and move past "," (and an object's next key).
  for (;;) {
    if (i >= n) return fail(n, "the text ends where a value was expected");
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */) {
      i = skipWs(text, i + 1);
      if (text.charCodeAt(i) === 0x7d /* } */) {
        i++;
      } else {
        stack.push(OBJECT);
        const key = scanKey(text, i);
        if (!key.ok) return key;
        i = key.end;
        continue;
      }
    } else if (c === 0x5b /* [ */) {
      i = skipWs(text, i + 1);
      if (text.charCodeAt(i) === 0x5d /* ] */) {
        i++;
      } else {
        stack.push(ARRAY);
        continue;
      }
    } else if (c === 0x22 /* " */) {
      const s = scanString(text, i);
      if (!s.ok) return s;
      i = s.end;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const num = scanNumber(text, i);
      if (!num.ok) return num;
      i = num.end;
    } else if (text.startsWith("true", i)) {
      i += 4;
    } else if (text.startsWith("false", i)) {
      i += 5;
    } else if (text.startsWith("null", i)) {
      i += 4;
    } else {
      return fail(i, `unexpected ${describeChar(text, i)} where a value was expected`);
    }
    const after = afterValue(text, i, stack);
    if (!after.ok || after.done) return after.ok ? { ok: true, end: after.end } : after;
    i = after.end;
  }
}

type AfterValue = { ok: true; end: number; done: boolean } | { ok: false; error: JsonSyntaxError };

/**
 * After a value ending at `i`: pops every container it closes. Returns `done` with the end of
 * the outermost value when the stack empties, otherwise the start of the next element (past
 * "," and, in an object, past its key and ":"). A plain loop rather than a labelled
 * `continue` in the caller, which Stryker cannot instrument.
 */
function afterValue(text: string, i: number, stack: number[]): AfterValue {
  for (;;) {
    if (stack.length === 0) return { ok: true, end: i, done: true };
    i = skipWs(text, i);
    if (i >= text.length) {
      return {
        ok: false,
        error: { offset: text.length, reason: "the text ends inside an unclosed object or array" },
      };
    }
    const top = stack[stack.length - 1];
    const d = text.charCodeAt(i);
    if (d === 0x2c /* , */) {
      i = skipWs(text, i + 1);
      if (top !== OBJECT) return { ok: true, end: i, done: false };
      const key = scanKey(text, i);
      return key.ok ? { ok: true, end: key.end, done: false } : key;
    }
    if ((top === OBJECT && d === 0x7d) || (top === ARRAY && d === 0x5d)) {
      stack.pop();
      i++;
      continue;
    }
    const expected = top === OBJECT ? `"," or "}"` : `"," or "]"`;
    return {
      ok: false,
      error: { offset: i, reason: `expected ${expected} but found ${describeChar(text, i)}` },
    };
  }
}

/** Index of the first non-whitespace character at or after `i` (JSON whitespace only). */
export function skipWs(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else return i;
  }
}

/** Scans `"key"` then `:` and whitespace; returns the index where the value starts. */
function scanKey(text: string, i: number): ScanResult {
  if (i >= text.length)
    return {
      ok: false,
      error: { offset: i, reason: "the text ends where a property name was expected" },
    };
  if (text.charCodeAt(i) !== 0x22) {
    return {
      ok: false,
      error: {
        offset: i,
        reason: `expected a property name in double quotes but found ${describeChar(text, i)}`,
      },
    };
  }
  const s = scanString(text, i);
  if (!s.ok) return s;
  const j = skipWs(text, s.end);
  if (j >= text.length)
    return { ok: false, error: { offset: j, reason: `the text ends where ":" was expected` } };
  if (text.charCodeAt(j) !== 0x3a) {
    return {
      ok: false,
      error: {
        offset: j,
        reason: `expected ":" after the property name but found ${describeChar(text, j)}`,
      },
    };
  }
  return { ok: true, end: skipWs(text, j + 1) };
}

/** Characters that need no attention inside a string: skipped natively, in one step. */
const PLAIN = /[^"\\\u0000-\u001f]+/y;
/** The four hex digits of a `\u` escape. */
const HEX4 = /[0-9a-fA-F]{4}/y;

function scanString(text: string, start: number): ScanResult {
  const n = text.length;
  let i = start + 1;
  for (;;) {
    PLAIN.lastIndex = i;
    if (PLAIN.test(text)) i = PLAIN.lastIndex;
    if (i >= n) break;
    // PLAIN stops only at a quote, a backslash or a control character.
    const c = text.charCodeAt(i);
    if (c === 0x22) return { ok: true, end: i + 1 };
    if (c !== 0x5c /* \ */) {
      return {
        ok: false,
        error: {
          offset: i,
          reason: `raw control character U+${c.toString(16).padStart(4, "0").toUpperCase()} in a string; escape it (e.g. \\n, \\t)`,
        },
      };
    }
    if (text.charCodeAt(i + 1) === 0x75 /* u */) {
      HEX4.lastIndex = i + 2;
      if (HEX4.test(text)) {
        i += 6;
        continue;
      }
      // Cut inside the escape: the string is unterminated, not wrong.
      if (/^[0-9a-fA-F]*$/.test(text.slice(i + 2))) break;
      return {
        ok: false,
        error: {
          offset: i,
          reason: `invalid unicode escape: "\\u" must be followed by 4 hex digits`,
        },
      };
    }
    if (i + 1 >= n) break;
    if (!'"\\/bfnrt'.includes(text[i + 1])) {
      return {
        ok: false,
        error: { offset: i, reason: `invalid escape "\\${text[i + 1]}" in a string` },
      };
    }
    i += 2;
  }
  return {
    ok: false,
    error: { offset: n, reason: "the text ends inside a string (unterminated string)" },
  };
}

function scanNumber(text: string, start: number): ScanResult {
  const m = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  m.lastIndex = start;
  const match = m.exec(text);
  if (!match) {
    return {
      ok: false,
      error: { offset: start, reason: `invalid number at ${describeChar(text, start)}` },
    };
  }
  const end = start + match[0].length;
  const next = text.charCodeAt(end);
  if (next === 0x2e || next === 0x65 || next === 0x45 || (next >= 0x30 && next <= 0x39)) {
    if (end + 1 >= text.length)
      return { ok: false, error: { offset: text.length, reason: "the text ends inside a number" } };
    return {
      ok: false,
      error: { offset: end, reason: 'invalid number (leading zero, or a bare "." or exponent)' },
    };
  }
  return { ok: true, end };
}

/** `"x"`, `end of text` or `U+0007` for error messages. */
export function describeChar(text: string, i: number): string {
  if (i >= text.length) return "the end of the text";
  const c = text.charCodeAt(i);
  if (c < 0x20 || c === 0x7f || c === 0xfeff)
    return `character U+${c.toString(16).padStart(4, "0").toUpperCase()}`;
  return JSON.stringify(String.fromCodePoint(text.codePointAt(i)!));
}
