// The optional peer dependencies: what only some embedders use (a store engine, a job queue, a
// provider package, a tokenizer) is not installed with Keel; it is loaded on first use, and its
// absence is an error that says which feature needs it and what to install.

/** Each optional peer and the version range Keel is tested with (package.json's peerDependencies). */
export const OPTIONAL_PEERS = {
  "better-sqlite3": "^12.11.1",
  pg: "^8.23.1",
  "graphile-worker": "^0.17.3",
  "gpt-tokenizer": "^4.0.0",
  "@ai-sdk/anthropic": "^3.0.140",
  "@ai-sdk/google": "^3.0.141",
  "@ai-sdk/openai": "^3.0.141",
  "@modelcontextprotocol/sdk": "^1.32.2",
  elkjs: "^0.12.1",
  // A range, not a caret: the API package is the one global the user's SDK registers with, so
  // any 1.x from the release that has what telemetry uses will do.
  "@opentelemetry/api": ">=1.4.0 <2",
} as const;

export type OptionalPeer = keyof typeof OPTIONAL_PEERS;

/** A feature needs an optional peer dependency that is not installed (or does not load). */
export class MissingPeerError extends Error {
  override readonly name = "MissingPeerError";
  /** The package to install. */
  readonly peer: OptionalPeer;

  constructor(peer: OptionalPeer, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.peer = peer;
  }
}

/** `npm install <peer>@<range>`: the command the messages give. */
export function installCommand(peer: OptionalPeer): string {
  const spec = `${peer}@${OPTIONAL_PEERS[peer]}`;
  // A range with a space or `<` is quoted, or the shell would read it as a redirect.
  return /[\s<>]/.test(spec) ? `npm install '${spec}'` : `npm install ${spec}`;
}

/**
 * Loads `peer` (or `peer/subpath`) with `load`, or throws a `MissingPeerError` naming `feature`
 * and the command that installs it. A peer that is installed but fails to load (a native
 * module built for another Node) says so, with its own error.
 * Contract: `load` is the caller's `require` (`createRequire(import.meta.url)`): it returns
 * the module or throws Node's error; it is called once per call of `loadPeer`.
 */
export function loadPeer<T>(
  load: (specifier: string) => unknown,
  peer: OptionalPeer,
  feature: string,
  subpath?: string,
): T {
  const specifier = subpath ? `${peer}/${subpath}` : peer;
  try {
    return load(specifier) as T;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const message = error instanceof Error ? error.message : String(error);
    // Only the peer itself missing: a missing dependency *of* the peer is its own problem.
    const missing =
      (code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") &&
      message.includes(`'${specifier}'`);
    throw new MissingPeerError(
      peer,
      missing
        ? `${feature} needs the package ${peer}, an optional peer dependency of keel that is not installed: ${installCommand(peer)}`
        : `${feature} needs the package ${peer}, which is installed but does not load (${message.split("\n")[0]}): rebuild or reinstall it (npm rebuild ${peer}, or ${installCommand(peer)})`,
      { cause: error },
    );
  }
}
