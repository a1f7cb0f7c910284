import { createMachine } from "xstate";
import { type SessionMachine, sessionMachine } from "../../../machines/session.machine.ts";

// biome-ignore lint/suspicious/noExplicitAny: surgery on a machine's raw config
type Config = any;

/** The session chart with its raw config changed by `edit` (a deep copy is edited). */
function mutated(edit: (config: Config) => void): SessionMachine {
  const config: Config = structuredCloneConfig(sessionMachine.config);
  edit(config);
  return createMachine(
    config,
    // biome-ignore lint/suspicious/noExplicitAny: implementations of the same machine
    sessionMachine.implementations as any,
  ) as unknown as SessionMachine;
}

/** A copy of a config whose plain objects and arrays are copied and functions shared. */
function structuredCloneConfig(value: Config): Config {
  if (Array.isArray(value)) return value.map(structuredCloneConfig);
  if (value && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, structuredCloneConfig(v)]));
  }
  return value;
}

const open = (c: Config) => c.states.open.states;
const work = (c: Config) => open(c).work.states;

/** Broken on purpose (invariant 17 of docs/architecture.md): the quiet guard ignores the edits, so a sleep cuts under one. */
export const sleepsUnderEdit = mutated((c) => {
  open(c).residency.states.awake.on.sleep.guard = ({ event }: Config) =>
    event.type === "sleep" && event.allowed;
});

/** Broken on purpose (invariant 17 of docs/architecture.md): an edit begun while asleep writes without a reopen. */
export const editsLogLetGo = mutated((c) => {
  open(c).residency.states.asleep.on["edit.begin"] = { target: "awake" };
});

/** Broken on purpose (invariant 18 of docs/architecture.md): a wake while a turn runs starts another one. */
export const secondRunner = mutated((c) => {
  work(c).running.on.wake = { target: "running", reenter: true };
});

/**
 * Broken on purpose (invariant 18 of docs/architecture.md): a preparation that found nothing runnable runs a turn
 * anyway, the old coordinator's execution without a turn.
 */
export const runsWithoutInputs = mutated((c) => {
  const ready = work(c).starting.states.preparing.on["turn.ready"];
  work(c).starting.states.preparing.on["turn.ready"] = ready.slice(1);
});

/** Broken on purpose (invariant 18 of docs/architecture.md): a close during a takeover does not wait for it. */
export const closesUnderTakeover = mutated((c) => {
  c.states.open.on.close = { target: "closing", actions: "abortRun" };
});

/** Broken on purpose (invariant 18 of docs/architecture.md): a takeover's end does not adopt the forwarded prompts. */
export const dropsForwarded = mutated((c) => {
  open(c).role.states.takingOver.on["takeover.done"] = { target: "owner", actions: "adopted" };
});

/** Broken on purpose (invariant 6 of docs/architecture.md): the handover ignores the inbox and always goes idle. */
export const idleAfterCleanup = mutated((c) => {
  work(c).cleaning.on["cleanup.done"] = { target: "idle" };
});
