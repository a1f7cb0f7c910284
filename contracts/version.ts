// Keel's own version, as package.json says (a test checks they agree): what a session's log
// records as its writer (session/entries.ts `EntryWriter`) and what `keel --version` prints.

/** Keel's package version. */
export const KEEL_VERSION = "0.1.0";
