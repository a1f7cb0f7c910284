import { createRequire } from "node:module";
import type * as GptEncoding from "gpt-tokenizer/encoding/o200k_base";
import { loadPeer } from "../contracts/optional-peer.ts";

/**
 * Context windows and tokenizers of OpenAI model families (for `openaiModel`).
 *
 * Tokens are counted with `gpt-tokenizer` (pure JS, the faster of the two well-kept OpenAI
 * tokenizers on Node 20: see bench/extras/tokenizers.ts). Its encoding tables are large, so each
 * is loaded on first use, synchronously, and only for models of its family.
 */

/** A family's limits: the context window and the output reserve, in tokens. */
export interface ModelLimits {
  contextWindow: number;
  maxOutputTokens: number;
  /** The input limit, when the model's is below its window less its reserve (`Model.maxInputTokens`). */
  maxInputTokens?: number;
}

type Encoding = "o200k_base" | "cl100k_base";

/**
 * Known models by name prefix (the longest matching prefix wins), from OpenAI's model pages.
 * The reserve is the documented maximum output, capped at 32 768 tokens: a larger reserve only
 * makes compaction start earlier than any ordinary answer needs.
 */
const KNOWN: readonly [prefix: string, limits: ModelLimits, encoding: Encoding][] = [
  // gpt-5: 400 000 in all, of which at most 272 000 input (128 000 are kept for output).
  [
    "gpt-5",
    { contextWindow: 400_000, maxOutputTokens: 32_768, maxInputTokens: 272_000 },
    "o200k_base",
  ],
  ["gpt-4.1", { contextWindow: 1_047_576, maxOutputTokens: 32_768 }, "o200k_base"],
  ["gpt-4.5", { contextWindow: 128_000, maxOutputTokens: 16_384 }, "o200k_base"],
  ["gpt-4o", { contextWindow: 128_000, maxOutputTokens: 16_384 }, "o200k_base"],
  ["chatgpt-4o", { contextWindow: 128_000, maxOutputTokens: 16_384 }, "o200k_base"],
  ["o1-mini", { contextWindow: 128_000, maxOutputTokens: 32_768 }, "o200k_base"],
  ["o1", { contextWindow: 200_000, maxOutputTokens: 32_768 }, "o200k_base"],
  ["o3", { contextWindow: 200_000, maxOutputTokens: 32_768 }, "o200k_base"],
  ["o4-mini", { contextWindow: 200_000, maxOutputTokens: 32_768 }, "o200k_base"],
  ["gpt-4-turbo", { contextWindow: 128_000, maxOutputTokens: 4_096 }, "cl100k_base"],
  ["gpt-4-32k", { contextWindow: 32_768, maxOutputTokens: 4_096 }, "cl100k_base"],
  ["gpt-4", { contextWindow: 8_192, maxOutputTokens: 4_096 }, "cl100k_base"],
  ["gpt-3.5-turbo", { contextWindow: 16_385, maxOutputTokens: 4_096 }, "cl100k_base"],
];

function lookup(model: string) {
  const name = model.toLowerCase().replace(/^openai\//, "");
  let best: (typeof KNOWN)[number] | undefined;
  for (const k of KNOWN) {
    if (name.startsWith(k[0]) && (!best || k[0].length > best[0].length)) best = k;
  }
  return best;
}

/** The known limits of `model`, or undefined for a model this table does not know. */
export function knownModelLimits(model: string): ModelLimits | undefined {
  const k = lookup(model);
  return k ? { ...k[1] } : undefined;
}

const require = createRequire(import.meta.url);
const encoders = new Map<Encoding, (text: string) => number>();
/** Special-token text (`<|endoftext|>`) in content is counted as ordinary text, never refused. */
const NO_SPECIAL = { disallowedSpecial: new Set<string>() };

function encoder(encoding: Encoding): (text: string) => number {
  let count = encoders.get(encoding);
  if (!count) {
    // Loaded synchronously, on first use (the tables are large: bench/FIGURES.md has the time).
    const mod: typeof GptEncoding =
      encoding === "o200k_base"
        ? require("gpt-tokenizer/cjs/encoding/o200k_base")
        : require("gpt-tokenizer/cjs/encoding/cl100k_base");
    count = (text: string) => mod.countTokens(text, NO_SPECIAL);
    encoders.set(encoding, count);
  }
  return count;
}

let installed: boolean | undefined;

/**
 * Whether gpt-tokenizer (an optional peer) can be loaded. Without it, OpenAI models' tokens are
 * estimated from characters as any other model's, and a warning says once what to install.
 */
function tokenizerInstalled(): boolean {
  if (installed === undefined) {
    try {
      loadPeer(
        require.resolve,
        "gpt-tokenizer",
        "Counting OpenAI models' tokens exactly",
        "cjs/encoding/o200k_base",
      );
      installed = true;
    } catch (error) {
      installed = false;
      process.emitWarning(
        `${(error as Error).message}; until then they are estimated from characters`,
        { code: "KEEL_NO_TOKENIZER" },
      );
    }
  }
  return installed;
}

/**
 * A token counter for `model` (the tokenizer of its family), or undefined when its family is
 * not known or gpt-tokenizer is not installed (callers then estimate from characters). The
 * table loads on the first count. Counting is linear in the text (see `countByPieces`).
 */
export function openaiTokenCounter(model: string): ((text: string) => number) | undefined {
  const k = lookup(model);
  if (!k || !tokenizerInstalled()) return undefined;
  const encoding = k[2];
  return (text) => (text.length === 0 ? 0 : countByPieces(text, encoder(encoding)));
}

/** Longest piece handed to the tokenizer at once (characters). */
export const PIECE_CHARS = 512;
/**
 * Longest piece of a run with no place to cut (no line break, no word's space in a piece's
 * second half: a paste of one letter): the tokenizer's cost on such a piece grows with its
 * square, so it gets pieces this short.
 */
export const RUN_PIECE_CHARS = 128;
/** Past this many characters a text is estimated (⌈chars / 4⌉), not tokenized. */
export const EXACT_CHARS = 64 * 1024;

/**
 * Counts `text` with `count` in linear time. The BPE tokenizer's cost grows with the square of
 * a piece it cannot split (a long run of one character), so the text is counted in pieces of
 * at most {@link PIECE_CHARS}, each cut after a line break or before a word's space when one
 * is near (where the tokenizer splits anyway, so the sum is the same, or within a token a
 * cut), and a piece with no such place (a run of one letter) at {@link RUN_PIECE_CHARS}; a
 * text longer than {@link EXACT_CHARS} gets the chars-based estimate, which provider usage replaces after the response (a counter that keeps the event
 * loop busy for seconds is worse than an estimate). This is a pure function.
 */
export function countByPieces(text: string, count: (piece: string) => number): number {
  if (text.length > EXACT_CHARS) return Math.ceil(text.length / 4);
  if (text.length <= RUN_PIECE_CHARS) return count(text);
  let total = 0;
  let at = 0;
  while (at < text.length) {
    let end = Math.min(text.length, at + PIECE_CHARS);
    if (end < text.length) {
      // Cut where the tokenizer splits too, in the piece's second half when it can: after a
      // line break, or before a space (a word keeps its leading space). With no such place,
      // the piece is one unsplittable run: a short piece.
      let cut = 0;
      for (let i = end; i > at + PIECE_CHARS / 2; i--) {
        const c = text.charCodeAt(i - 1);
        if (c === 10 || (text.charCodeAt(i) === 32 && c !== 32)) {
          cut = i;
          break;
        }
      }
      end = cut > 0 ? cut : at + RUN_PIECE_CHARS;
    } else if (end - at > RUN_PIECE_CHARS && !hasBreak(text, at, end)) {
      end = at + RUN_PIECE_CHARS; // the last piece, one unsplittable run
    }
    if (end < text.length) {
      // Never split a surrogate pair.
      const last = text.charCodeAt(end - 1);
      if (last >= 0xd800 && last <= 0xdbff) end--;
    }
    total += count(text.slice(at, end));
    at = end;
  }
  return total;
}

/** Whether `text[from, to)` holds a line break or a space (a place the tokenizer splits). */
function hasBreak(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || c === 32) return true;
  }
  return false;
}
