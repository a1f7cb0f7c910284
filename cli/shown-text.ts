// Text from the model, a tool or a client, made safe and honest to show a person on a terminal:
// nothing it holds can drive the terminal, and nothing is hidden behind whitespace.

/**
 * Characters that must not reach a terminal raw: C0 controls (ESC starts the sequences that
 * retitle the window, clear the screen or set the clipboard, OSC 52), DEL, C1 controls (0x9b is
 * a one-byte CSI), zero-width characters and the bidirectional overrides that reorder what is
 * shown, and the characters a terminal draws as nothing or as a blank although they are not
 * spaces (so a run of them hides what follows, as spaces would): the soft hyphen, the Braille
 * blank U+2800, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, Khmer's invisible vowels,
 * the Mongolian separators, the line and paragraph separators, variation selectors,
 * interlinear annotation marks, invisible musical symbols and the tag characters
 * (U+E0000–U+E007F, which can carry hidden ASCII). Line feed and tab are kept where the caller
 * allows them.
 */
const HIDDEN =
  "\\u061c\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2069\\ufeff\\u00ad\\u034f\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2028\\u2029\\u2800\\u3164\\ufe00-\\ufe0f\\uffa0\\ufff9-\\ufffb\\u{1d173}-\\u{1d17a}\\u{e0000}-\\u{e007f}\\u{e0100}-\\u{e01ef}";
const UNSAFE = new RegExp(`[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f${HIDDEN}]`, "gu");
const UNSAFE_OR_LAYOUT = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${HIDDEN}]`, "gu");

/** `\uXXXX`, or `\u{XXXXX}` for a character beyond the Basic Multilingual Plane. */
const escaped = (c: string) => {
  const code = c.codePointAt(0) ?? 0;
  return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;
};

/**
 * `text` with every control character, DEL, C1 control, bidi override and character drawn as
 * a blank (see `UNSAFE`) written as a visible `\uXXXX` escape; line feeds and tabs are kept
 * when `lines` is true (the default), escaped too otherwise. This is a pure function.
 */
export function printable(text: string, lines = true): string {
  return text.replace(lines ? UNSAFE : UNSAFE_OR_LAYOUT, escaped);
}

/** A run of this many whitespace characters or more is shown as a count. */
export const WHITESPACE_RUN = 4;

/** What {@link shownCall} made of a call's arguments. */
export interface ShownCall {
  /** The whole arguments as one line: JSON, runs of whitespace counted, controls escaped. */
  text: string;
  /** Runs of whitespace were replaced by `⟨N spaces⟩`-style counts (say so to the reader). */
  collapsed: boolean;
}

/** Spaces a terminal shows as blank: ASCII, no-break and the Unicode space separators. */
const RUN = new RegExp(
  `[ \\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000]{${WHITESPACE_RUN},}`,
  "g",
);

/**
 * A tool call's arguments as a person must see them before approving it: the whole JSON (never
 * cut), every run of {@link WHITESPACE_RUN} or more blank characters replaced by its count
 * (`⟨320 spaces⟩`), so text after a wall of spaces cannot slide past the edge of the screen,
 * and every control, invisible or reordering character escaped (line breaks and tabs are JSON
 * escapes already). This is a pure function; its cost is linear in the arguments' size.
 */
export function shownCall(args: unknown): ShownCall {
  const json = printable(JSON.stringify(args) ?? "undefined", false);
  let collapsed = false;
  const text = json.replace(RUN, (run) => {
    collapsed = true;
    return `⟨${run.length} spaces⟩`;
  });
  return { text, collapsed };
}

/** The note that goes with a collapsed rendering. */
export const COLLAPSED_NOTE =
  "(runs of whitespace are shown as ⟨N spaces⟩; the call runs with them as they are)";
