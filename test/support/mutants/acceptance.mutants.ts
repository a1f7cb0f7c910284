import { assertEvent, assign, createMachine } from "xstate";
import type { CheckEvidence } from "../../../contracts/acceptance.ts";
import { acceptanceMachine } from "../../../machines/acceptance.machine.ts";

/**
 * Broken on purpose (invariant 14 of docs/architecture.md): evidence is bound to the version known when the check
 * FINISHED, so a check that ran against v1 counts for v2 after a write read while it ran.
 */
export const bindsFinishVersionAcceptanceMachine = acceptanceMachine.provide({
  actions: {
    recordEvidence: assign(({ context, event }) => {
      assertEvent(event, "check.finished");
      const { [event.name]: run, ...running } = context.running;
      if (!run) return {};
      const evidence: CheckEvidence = {
        name: event.name,
        kind: run.kind,
        passed: event.passed,
        output: event.output,
        startedAt: event.startedAt,
        durationMs: event.durationMs,
        artifactVersion: context.version ?? run.version,
      };
      return { running, evidence: { ...context.evidence, [event.name]: evidence } };
    }),
  },
});

/**
 * Broken on purpose (invariant 14 of docs/architecture.md): a version read while a check runs is not noted, so a check
 * that saw the artifact change and change back counts as if nothing had happened.
 */
export const ignoresChangeWhileRunningAcceptanceMachine = acceptanceMachine.provide({
  actions: {
    readVersion: assign(({ event }) => {
      assertEvent(event, "artifact.read");
      return { version: event.version };
    }),
  },
});

/** Broken on purpose: the loop ignores `maxRounds` and follows up while checks fail. */
export const unboundedLoopAcceptanceMachine = acceptanceMachine.provide({
  guards: { mayFollowUp: ({ context }) => context.loop },
});

// biome-ignore lint/suspicious/noExplicitAny: surgery on a machine's raw config
type Config = any;

/**
 * Broken on purpose: `stopping` takes a check's late report as evidence, so a check that was
 * interrupted leaves a result.
 */
export const keepsInterruptedEvidenceAcceptanceMachine = (() => {
  const config: Config = acceptanceMachine.config;
  const { "check.finished": _late, ...on } = config.states.stopping.on;
  return createMachine(
    { ...config, states: { ...config.states, stopping: { ...config.states.stopping, on } } },
    // biome-ignore lint/suspicious/noExplicitAny: implementations of the same machine
    acceptanceMachine.implementations as any,
  ) as unknown as typeof acceptanceMachine;
})();
