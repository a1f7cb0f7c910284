import { customRandom, nanoid, urlAlphabet } from "nanoid";

/** Returns a fresh id, optionally with a readable prefix (`call_…`, `turn_…`). */
export type IdGenerator = (prefix?: string) => string;

/** Ids from nanoid's secure random source (pooled: one crypto call per many ids). */
export function createIds(size = 16): IdGenerator {
  return (prefix) => (prefix ? `${prefix}_${nanoid(size)}` : nanoid(size));
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
