import type { ActorSystem, AnyActorRef, AnyStateMachine } from "xstate";
import { type AcceptanceEffects, acceptanceMachine } from "../machines/acceptance.machine.ts";
import { type BatchEffects, batchMachine } from "../machines/batch.machine.ts";
import { isEffect } from "../machines/effect.ts";
import { type SessionMachine, sessionMachine } from "../machines/session.machine.ts";
import type { SessionEffects } from "../machines/session.types.ts";
import { type ToolCallEffects, toolCallMachine } from "../machines/tool-call.machine.ts";
import { turnMachine } from "../machines/turn.machine.ts";
import type { TurnEffects } from "../machines/turn.types.ts";

// biome-ignore lint/suspicious/noExplicitAny: any actor system (its type parameter is the tree's)
type System = ActorSystem<any>;
type AnyEffects = Record<string, (self: AnyActorRef, params: unknown) => void>;

/** The effects of the turn each actor system (one per turn actor tree) belongs to. */
const runs = new WeakMap<System, AnyEffects>();

/**
 * Binds one turn's effects to the actor system of its turn actor. Call it after
 * `createActor(hostedTurnMachine(...))` and before `start()`: every actor of the tree (the turn,
 * its batch, each call) finds the effects through the system it runs in.
 */
export function bindEffects(system: System, effects: TurnEffects): void;
/** A batch hosted alone (tests): only the batch's and its calls' effects are needed. */
export function bindEffects(system: System, effects: BatchEffects & ToolCallEffects): void;
/** A session's acceptance chart: its host's effects (`actors/acceptance.ts`). */
export function bindEffects(system: System, effects: AcceptanceEffects): void;
/** A session's chart: its host's effects (`actors/session-chart.ts`). */
export function bindEffects(system: System, effects: SessionEffects): void;
export function bindEffects(
  system: System,
  effects: (BatchEffects & ToolCallEffects) | AcceptanceEffects | SessionEffects,
): void {
  runs.set(system, effects as unknown as AnyEffects);
}

/**
 * The implementations of every action `machine` declares with `effect()`: each calls the method
 * of the same name on the effects bound to the actor's system, with the actor and the params.
 * Generic on purpose: a new effect in a chart needs its method in `TurnEffects` and `TurnRun`,
 * and nothing here.
 */
function effectsOf(machine: AnyStateMachine) {
  const actions: Record<string, (args: { self: AnyActorRef; system: System }, p: unknown) => void> =
    {};
  for (const [name, action] of Object.entries(machine.implementations.actions)) {
    if (!isEffect(action)) continue;
    actions[name] = ({ self, system }, params) => runs.get(system)![name](self, params);
  }
  return actions;
}

const toolCall = toolCallMachine.provide({ actions: effectsOf(toolCallMachine) });
const hostedBatches = new WeakMap<typeof batchMachine, typeof batchMachine>();

/**
 * The batch chart (`batchMachine`, or a test's variant) hosting the tool-call chart, with their
 * effects bound through {@link bindEffects}; built once per variant: building machines per turn
 * would cost more than a whole step.
 */
export function hostedBatchMachine(
  variant: typeof batchMachine = batchMachine,
): typeof batchMachine {
  let machine = hostedBatches.get(variant);
  if (!machine) {
    machine = variant.provide({ actors: { toolCall }, actions: effectsOf(variant) });
    hostedBatches.set(variant, machine);
  }
  return machine;
}

const hosted = new WeakMap<typeof turnMachine, typeof turnMachine>();

/**
 * The turn chart (`turnMachine`, or a test's variant of it) with every effect of the turn, its
 * batch and its calls bound through {@link bindEffects}. This is the only place the runtime
 * connects the charts to their effects: `machine.provide` of XState, nothing else. Built once
 * per variant and shared by every turn.
 */
export function hostedTurnMachine(variant: typeof turnMachine = turnMachine): typeof turnMachine {
  let machine = hosted.get(variant);
  if (!machine) {
    machine = variant.provide({
      actors: { batch: hostedBatchMachine() },
      actions: effectsOf(variant),
    });
    hosted.set(variant, machine);
  }
  return machine;
}

const hostedAcceptance = new WeakMap<typeof acceptanceMachine, typeof acceptanceMachine>();

/**
 * The acceptance chart (`acceptanceMachine`, or a test's variant) with its effects bound through
 * {@link bindEffects} to the session's acceptance host. Built once per variant.
 */
export function hostedAcceptanceMachine(
  variant: typeof acceptanceMachine = acceptanceMachine,
): typeof acceptanceMachine {
  let machine = hostedAcceptance.get(variant);
  if (!machine) {
    machine = variant.provide({ actions: effectsOf(variant) });
    hostedAcceptance.set(variant, machine);
  }
  return machine;
}

/** The names of every effect the acceptance chart declares (a test checks the host has each). */
export function declaredAcceptanceEffects(): string[] {
  return Object.keys(effectsOf(acceptanceMachine));
}

/** The names of every effect the three charts declare (a test checks `TurnRun` has each). */
export function declaredEffects(): string[] {
  return [turnMachine, batchMachine, toolCallMachine].flatMap((m) => Object.keys(effectsOf(m)));
}

const hostedSessions = new WeakMap<SessionMachine, SessionMachine>();

/**
 * The session chart (`sessionMachine`, or a test's variant) with its effects bound through
 * {@link bindEffects} to the session's host (`actors/session-chart.ts`). Built once per variant.
 */
export function hostedSessionMachine(variant: SessionMachine = sessionMachine): SessionMachine {
  let machine = hostedSessions.get(variant);
  if (!machine) {
    machine = variant.provide({ actions: effectsOf(variant) }) as SessionMachine;
    hostedSessions.set(variant, machine);
  }
  return machine;
}

/** The names of every effect the session chart declares (a test checks the host has each). */
export function declaredSessionEffects(): string[] {
  return Object.keys(effectsOf(sessionMachine));
}
