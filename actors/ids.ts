import { randomFillSync } from "node:crypto";
import { customRandom, urlAlphabet } from "nanoid";
import type { IdGenerator } from "../contracts/ids.ts";

/**
 * Ids of `size` characters from the secure random source, in nanoid's alphabet (`A-Za-z0-9_-`,
 * 6 random bits a character: 96 bits at the default 16). Bytes come from a pool refilled by one
 * `randomFillSync` per 256 ids, and each id is one native base64url encoding of its bytes,
 * cheaper than nanoid, which builds it a character at a time (bench/FIGURES.md,
 * `npx tsx bench/extras/ids.ts`), and a session makes several ids a step (entries, attempts,
 * calls).
 */
export function createIds(size = 16): IdGenerator {
  if (!Number.isInteger(size) || size < 1 || size > 1024) {
    throw new RangeError(`createIds: size must be an integer from 1 to 1024, got ${size}`);
  }
  const bytes = Math.ceil((size * 3) / 4); // base64url: 4 characters for every 3 bytes
  const poolSize = bytes * 256;
  const pool = Buffer.allocUnsafe(poolSize);
  let offset = poolSize;
  const next = (): string => {
    if (offset + bytes > poolSize) {
      randomFillSync(pool);
      offset = 0;
    }
    const text = pool.toString("base64url", offset, offset + bytes);
    offset += bytes;
    return text.length === size ? text : text.slice(0, size);
  };
  return (prefix) => (prefix ? `${prefix}_${next()}` : next());
}

/** Ids from an injected byte source (nanoid `customRandom`). */
export function randomIds(random: (bytes: number) => Uint8Array, size = 16): IdGenerator {
  const next = customRandom(urlAlphabet, size, random);
  return (prefix) => (prefix ? `${prefix}_${next()}` : next());
}

/** A deterministic id generator: the same seed gives the same ids (mulberry32). */
export function seededIds(seed: number, size = 12): IdGenerator {
  let state = seed >>> 0;
  const byte = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) & 0xff;
  };
  return randomIds((bytes) => Uint8Array.from({ length: bytes }, byte), size);
}
