import { coordinatorMachine } from "../../../machines/coordinator.machine.ts";

/**
 * MUTANT — a coordinator that rings the doorbell but never answers it: after cleanup it always
 * goes idle, the classic exit-window lost wake-up ("busy, so don't start one" then "done, so
 * idle"). Tests assert that the no-lost-wake-up checks FAIL on it.
 */
export const coordinatorIdleAfterCleanup = coordinatorMachine.provide({
  guards: { successorNeeded: () => false },
});
