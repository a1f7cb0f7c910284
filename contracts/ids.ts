/** Returns a fresh id, optionally with a readable prefix (`call_…`, `turn_…`). */
export type IdGenerator = (prefix?: string) => string;
