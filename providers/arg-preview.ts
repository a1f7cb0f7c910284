/**
 * Incremental preview of a tool call's JSON arguments while they stream.
 *
 * A single-pass state machine over the characters: a stack of open containers whose objects
 * and arrays are the preview itself, mutated in place. Each character is visited once, so the
 * total cost is linear in the argument size however often `value()` is read (re-parsing the
 * whole buffer per delta, as `partial-json` does, is quadratic).
 *
 * What `value()` shows for a prefix of a JSON text (a pure function of the prefix):
 * - objects and arrays as soon as they open, with their members so far;
 * - closed strings; an open string as its decoded prefix (an escape cut in half is left out);
 *   an open string that is an object KEY is dropped, and so is a key whose value has not
 *   started;
 * - a number as the longest valid number that prefixes it (`1.` and `1e` show `1`, `-` shows
 *   nothing); `true` / `false` / `null` only once complete (`tru` shows nothing);
 * - `undefined` before the first value starts.
 * Once the text is complete, `value()` deep-equals `JSON.parse(text)` (including `__proto__`
 * keys, which become own properties). Invalid input never throws: the preview freezes at the
 * last valid character and `error()` says where and why.
 */
export interface ArgPreview {
  /** Feeds the next delta of the argument text. Cost: O(delta.length). */
  push(delta: string): void;
  /**
   * The LIVE preview value: the same object graph keeps being mutated by later pushes. Do not
   * mutate it; take `structuredClone(value())` to keep a snapshot. Cost: O(1).
   */
  value(): unknown;
  /** True once one whole top-level JSON value has been read (trailing whitespace allowed). */
  complete(): boolean;
  /** The first syntax error, or undefined. After an error, pushes are ignored. */
  error(): ArgPreviewError | undefined;
}

export interface ArgPreviewError {
  /** Offset (UTF-16 units) of the offending character in the whole argument text. */
  offset: number;
  message: string;
}

type Container = Record<string, unknown> | unknown[];
interface Frame {
  c: Container;
  array: boolean;
  /** The object key whose value is being read (objects only). */
  key: string;
}

// Parser modes.
const VALUE = 0; // expecting a value
const ARRAY_FIRST = 1; // after `[`: a value or `]`
const KEY = 2; // after `,` in an object: a key
const KEY_FIRST = 3; // after `{`: a key or `}`
const COLON = 4;
const AFTER = 5; // after a member: `,` or the closer
const STRING = 6;
const ESCAPE = 7;
const UNICODE = 8;
const NUMBER = 9;
const LITERAL = 10;
const DONE = 11;
const FAILED = 12;

// Number sub-states; ZERO, INT, FRAC and EXP are accepting (the number may end there).
const N_MINUS = 0;
const N_ZERO = 1;
const N_INT = 2;
const N_DOT = 3;
const N_FRAC = 4;
const N_E = 5;
const N_ESIGN = 6;
const N_EXP = 7;
const N_END = -1; // the char ends the number (not consumed)
const N_FAIL = -2;

/** The JSON number grammar: the sub-state after `s` reads char code `c`. Pure. */
function numberNext(s: number, c: number): number {
  const digit = c >= 48 && c <= 57;
  const exp = c === 101 || c === 69;
  switch (s) {
    case N_MINUS:
      return c === 48 ? N_ZERO : digit ? N_INT : N_FAIL;
    case N_ZERO:
      return c === 46 ? N_DOT : exp ? N_E : digit ? N_FAIL : N_END;
    case N_INT:
      return digit ? N_INT : c === 46 ? N_DOT : exp ? N_E : N_END;
    case N_DOT:
      return digit ? N_FRAC : N_FAIL;
    case N_FRAC:
      return digit ? N_FRAC : exp ? N_E : N_END;
    case N_E:
      return c === 43 || c === 45 ? N_ESIGN : digit ? N_EXP : N_FAIL;
    case N_ESIGN:
      return digit ? N_EXP : N_FAIL;
    default:
      return digit ? N_EXP : N_END;
  }
}

const ESCAPES: Record<string, string> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};

const isWs = (c: number) => c === 32 || c === 10 || c === 13 || c === 9;
const isDigit = (c: number) => c >= 48 && c <= 57;

const own = { writable: true, enumerable: true, configurable: true };
function setMember(obj: Record<string, unknown>, key: string, v: unknown): void {
  if (key === "__proto__") Object.defineProperty(obj, key, { ...own, value: v });
  else obj[key] = v;
}

/** Creates an incremental partial-JSON preview (see {@link ArgPreview}). */
export function createArgPreview(): ArgPreview {
  let mode = VALUE;
  const stack: Frame[] = [];
  let root: unknown;
  let offset = 0;
  let failure: ArgPreviewError | undefined;
  // The open string (key or value), as a V8 rope: `+=` is O(piece).
  let str = "";
  let strIsKey = false;
  let hex = 0;
  let hexCount = 0;
  // The open number.
  let num = "";
  let numState = N_MINUS;
  let numValidLen = 0;
  let numShown = false;
  // The open literal.
  let literal = "";
  let literalValue: unknown = null;
  let literalPos = 0;
  // The open string or number changed since the slot was last written.
  let dirty = false;

  /** Writes `v` into the slot of the value being read (root, last array item, or key). */
  const setCurrent = (v: unknown, fresh: boolean) => {
    const top = stack[stack.length - 1];
    if (top === undefined) root = v;
    else if (top.array) {
      const arr = top.c as unknown[];
      if (fresh) arr.push(v);
      else arr[arr.length - 1] = v;
    } else setMember(top.c as Record<string, unknown>, top.key, v);
  };
  const valueDone = () => {
    mode = stack.length === 0 ? DONE : AFTER;
  };
  const fail = (at: number, ch: string, expected: string) => {
    sync(); // freeze the preview as of the last valid character
    failure = {
      offset: at,
      message: `unexpected ${JSON.stringify(ch)} at offset ${at}: expected ${expected}`,
    };
    mode = FAILED;
  };
  const syncNumber = () => {
    if (numValidLen === 0) return;
    setCurrent(Number(num.slice(0, numValidLen)), !numShown);
    numShown = true;
  };
  const sync = () => {
    if (!dirty) return;
    dirty = false;
    if (mode === NUMBER) syncNumber();
    else if ((mode === STRING || mode === ESCAPE || mode === UNICODE) && !strIsKey)
      setCurrent(str, false);
  };
  const open = (c: Container, array: boolean) => {
    setCurrent(c, true);
    stack.push({ c, array, key: "" });
    mode = array ? ARRAY_FIRST : KEY_FIRST;
  };
  const close = () => {
    stack.pop();
    valueDone();
  };
  /** Starts the value at `c`; false when `c` cannot start a value. */
  const startValue = (c: number): boolean => {
    if (c === 34) {
      str = "";
      strIsKey = false;
      setCurrent("", true);
      mode = STRING;
    } else if (c === 123) open({}, false);
    else if (c === 91) open([], true);
    else if (c === 45 || isDigit(c)) {
      num = String.fromCharCode(c);
      numState = c === 45 ? N_MINUS : c === 48 ? N_ZERO : N_INT;
      numValidLen = c === 45 ? 0 : 1;
      numShown = false;
      dirty = true;
      mode = NUMBER;
    } else if (c === 116 || c === 102 || c === 110) {
      literal = c === 116 ? "true" : c === 102 ? "false" : "null";
      literalValue = c === 116 ? true : c === 102 ? false : null;
      literalPos = 1;
      mode = LITERAL;
    } else return false;
    return true;
  };
  const push = (delta: string) => {
    const n = delta.length;
    let i = 0;
    while (i < n && mode !== FAILED) {
      const at = offset + i;
      if (mode === STRING) {
        let j = i;
        let c = 0;
        while (j < n) {
          c = delta.charCodeAt(j);
          if (c === 34 || c === 92 || c < 32) break;
          j++;
        }
        if (j > i) {
          str += delta.slice(i, j);
          dirty = true;
        }
        if (j === n) break;
        i = j;
        if (c === 92) mode = ESCAPE;
        else if (c === 34) {
          if (strIsKey) {
            stack[stack.length - 1].key = str;
            mode = COLON;
          } else {
            setCurrent(str, false);
            dirty = false;
            valueDone();
          }
        } else
          fail(offset + j, delta[j], "a string character (control characters must be escaped)");
        i++;
        continue;
      }
      const c = delta.charCodeAt(i);
      switch (mode) {
        case ESCAPE:
          if (c === 117) {
            mode = UNICODE;
            hex = 0;
            hexCount = 0;
          } else if (ESCAPES[delta[i]] !== undefined) {
            str += ESCAPES[delta[i]];
            dirty = true;
            mode = STRING;
          } else fail(at, delta[i], 'an escape (one of " \\ / b f n r t u)');
          break;
        case UNICODE: {
          const d =
            c >= 48 && c <= 57
              ? c - 48
              : c >= 97 && c <= 102
                ? c - 87
                : c >= 65 && c <= 70
                  ? c - 55
                  : -1;
          if (d < 0) fail(at, delta[i], "a hex digit in a \\u escape");
          else {
            hex = hex * 16 + d;
            if (++hexCount === 4) {
              str += String.fromCharCode(hex);
              dirty = true;
              mode = STRING;
            }
          }
          break;
        }
        case NUMBER: {
          const base = num.length;
          let j = i;
          let next = N_END;
          while (j < n) {
            next = numberNext(numState, delta.charCodeAt(j));
            if (next < 0) break;
            numState = next;
            j++;
            if (next === N_ZERO || next === N_INT || next === N_FRAC || next === N_EXP) {
              numValidLen = base + j - i;
            }
          }
          if (j > i) {
            num += delta.slice(i, j);
            dirty = true;
          }
          i = j;
          if (j === n) continue;
          if (next === N_FAIL) {
            const hint = numState === N_ZERO ? ". or e after a leading 0" : "a digit";
            fail(offset + j, delta[j], hint);
            continue;
          }
          syncNumber();
          dirty = false;
          valueDone();
          continue; // re-read delta[j] after the number
        }
        case LITERAL:
          if (c !== literal.charCodeAt(literalPos))
            fail(at, delta[i], `${JSON.stringify(literal[literalPos])} of ${literal}`);
          else if (++literalPos === literal.length) {
            setCurrent(literalValue, true);
            valueDone();
          }
          break;
        default:
          if (isWs(c)) break;
          if (mode === VALUE || mode === ARRAY_FIRST) {
            if (mode === ARRAY_FIRST && c === 93) close();
            else if (!startValue(c)) fail(at, delta[i], "a JSON value");
          } else if (mode === KEY || mode === KEY_FIRST) {
            if (c === 34) {
              str = "";
              strIsKey = true;
              mode = STRING;
            } else if (mode === KEY_FIRST && c === 125) close();
            else fail(at, delta[i], mode === KEY ? "a quoted key" : "a quoted key or }");
          } else if (mode === COLON) {
            if (c === 58) mode = VALUE;
            else fail(at, delta[i], ":");
          } else if (mode === AFTER) {
            const top = stack[stack.length - 1];
            if (c === 44) mode = top.array ? VALUE : KEY;
            else if (c === (top.array ? 93 : 125)) close();
            else fail(at, delta[i], top.array ? ", or ]" : ", or }");
          } else fail(at, delta[i], "the end of the arguments (one JSON value only)");
      }
      i++;
    }
    offset += n;
  };

  return {
    push: (delta) => {
      if (mode !== FAILED && delta.length > 0) push(delta);
    },
    value: () => {
      sync();
      return root;
    },
    complete: () => mode === DONE,
    error: () => failure,
  };
}
