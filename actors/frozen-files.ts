// The frozen files of an acceptance spec on disk (docs/acceptance.md): what is at each path now,
// its identity (so a change during a check is seen even when undone), and putting the spec's
// copy back without writing through a symlink.
import { randomUUID } from "node:crypto";
import {
  lstatSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import type { AgentEventBody } from "../contracts/events.ts";
import { type FrozenFile, sha256 } from "./acceptance-spec.ts";

/**
 * Puts the spec's copy of `f` in place: written beside it and renamed over whatever is at its
 * path (a symlink is replaced, never written through), in a folder that must still be the
 * workspace's own (not a symlink leading elsewhere). False (and a log line) when it cannot.
 */
export function restoreFile(f: FrozenFile, logger: Logger): boolean {
  const dir = path.dirname(f.real);
  const temp = path.join(dir, `.${path.basename(f.real)}.keel-restore-${randomUUID()}`);
  try {
    // A folder put in the file's place (`node x.test.mjs` would run its index.js) goes.
    if (lstatSync(f.real, { throwIfNoEntry: false })?.isDirectory())
      rmSync(f.real, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    if (realpathSync(dir) !== dir) throw new Error(`${dir} is no longer the workspace's folder`);
    writeFileSync(temp, f.content, { flag: "wx" });
    renameSync(temp, f.real);
    return true;
  } catch (err) {
    try {
      rmSync(temp, { force: true });
    } catch {} // e.g. ENOTDIR: the folder is not one; nothing was written
    logger.warn({ err }, `could not restore frozen file ${f.path}`);
    return false;
  }
}

/** Puts back the spec's copy of every frozen file that differs on disk; their paths. */
export function restoreFrozen(
  files: readonly FrozenFile[],
  logger: Logger,
  emit: (event: AgentEventBody) => void,
): string[] {
  const restored: string[] = [];
  for (const f of files) {
    if (stateOf(f) === f.sha256) continue;
    if (restoreFile(f, logger)) restored.push(f.path);
  }
  if (restored.length > 0) {
    const message = `acceptance: frozen ${restored.join(", ")} had changed in the workspace; the spec's copy was restored before the checks`;
    emit({ type: "log.written", level: "warn", message });
  }
  return restored;
}

/**
 * A frozen file's identity on disk: its content's SHA-256 (or what is there instead), and the
 * inode and change time, which every write moves (even one that puts the same bytes back, or
 * a swap and a swap back), so a change during a check is seen even when undone before the end.
 */
export interface Identity {
  sha256: string;
  inode: string;
  ctime: string;
}

export function identityOf(f: FrozenFile): Identity {
  let info: ReturnType<typeof lstatSync> | undefined;
  try {
    info = lstatSync(f.real, { bigint: true, throwIfNoEntry: false });
  } catch {
    info = undefined; // e.g. ENOTDIR: a file where its folder was
  }
  return {
    sha256: stateOf(f),
    inode: info ? `${info.dev}:${info.ino}` : "missing",
    ctime: info ? String(info.ctimeNs) : "missing",
  };
}

export function sameIdentity(a: Identity, b: Identity): boolean {
  return a.sha256 === b.sha256 && a.inode === b.inode && a.ctime === b.ctime;
}

/** What is at a frozen file's path now: its SHA-256 when it is a regular file, else what it is. */
export function stateOf(f: FrozenFile): string {
  try {
    const info = lstatSync(f.real);
    return info.isFile() ? sha256(readFileSync(f.real)) : `not a regular file (mode ${info.mode})`;
  } catch {
    return "missing";
  }
}
