/**
 * `s`, flattened. V8 builds long concatenations (a template literal of two parts over 12
 * characters) and `JSON.stringify` output as ropes: a tree of pieces that costs more memory than
 * the flat string (bench/FIGURES.md) and stays a tree for as long as it is held. Reading one
 * character flattens it in place (the GC then drops the pieces). Use on strings a session
 * keeps: entry ids, stored JSON.
 */
export function flat(s: string): string {
  s.charCodeAt(0);
  return s;
}
