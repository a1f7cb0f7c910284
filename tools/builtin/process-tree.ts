import { readdirSync, readFileSync } from "node:fs";

/** The environment variable every process a `shell` call starts inherits: its tag. */
export const SHELL_TAG_VAR = "KEEL_SHELL_TAG";

/**
 * The processes a `shell` call started that left its process group: `setsid cmd &` and
 * `setsid -f cmd` start a new session (and group) and may be reparented to init, so neither the
 * group kill nor the parent chain reaches them. Found by scanning `/proc` (Linux) for a process
 * whose session or group id is the shell's pid (`detached: true` made the shell a session
 * leader), or whose environment carries the call's tag (`KEEL_SHELL_TAG=<tag>`, inherited
 * through `setsid`, forks and `exec`; a process that clears its environment on purpose is not
 * found). Never includes this process. Off Linux (no `/proc`): [].
 * Synchronous on purpose: procfs reads never wait for a disk, and small reads through the
 * thread pool cost several times more than reading them in line. One scan per call that
 * ends, so its cost is one read of `stat` (and `environ`) per process of the machine.
 * Contract: never throws; processes that vanish during the scan are skipped.
 */
export function taggedProcesses(shellPid: number, tag: string): number[] {
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const needle = `${SHELL_TAG_VAR}=${tag}\0`;
  const found: number[] = [];
  for (const name of names) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after "(comm) ": state ppid pgrp session …; comm may hold spaces and ")".
      const [state, , pgrp, session] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z") continue; // a zombie is dead already; only its parent can reap it
      if (Number(pgrp) === shellPid || Number(session) === shellPid) {
        found.push(pid);
        continue;
      }
      const environ = readFileSync(`/proc/${pid}/environ`, "latin1");
      if (environ.includes(needle)) found.push(pid);
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

/** Whether `pid` still runs (a zombie does not). */
export function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true;
  }
}

/** Sends `signal` to each pid; a pid already gone is skipped. */
export function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {}
  }
}

/** A process as the kernel knows it: its pid and its start time (clock ticks after boot). */
export interface ProcessRef {
  pid: number;
  start: string;
}

/** The start time of `pid` (field 22 of `/proc/<pid>/stat`), or undefined (gone, no procfs). */
export function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/**
 * Every live process below `root` in the parent chain (children, their children, …), with its
 * start time: a process that calls `setsid` and clears its environment keeps its parent, so
 * it is found here while its parent lives. Linux only ([] elsewhere). Never throws.
 */
export function descendants(root: number): ProcessRef[] {
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const children = new Map<number, ProcessRef[]>();
  for (const name of names) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z") continue;
      const ppid = Number(fields[1]);
      const list = children.get(ppid) ?? [];
      list.push({ pid, start: fields[19] });
      children.set(ppid, list);
    } catch {
      // gone
    }
  }
  const found: ProcessRef[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.pop()!) ?? []) {
      found.push(child);
      queue.push(child.pid);
    }
  }
  return found;
}

/**
 * Sends `signal` to each process that is still the one recorded (same pid AND start time), so
 * a pid reused by an unrelated process after ours ended is never signalled.
 */
export function signalRefs(refs: Iterable<ProcessRef>, signal: NodeJS.Signals): void {
  for (const ref of refs) {
    if (startTime(ref.pid) !== ref.start) continue;
    try {
      process.kill(ref.pid, signal);
    } catch {}
  }
}

/** Whether any recorded process still runs as itself (not a zombie, not a reused pid). */
export function refsAlive(refs: Iterable<ProcessRef>): boolean {
  for (const ref of refs) if (startTime(ref.pid) === ref.start && running(ref.pid)) return true;
  return false;
}
