import { assign } from "xstate";
import {
  type CoordinatorContext,
  coordinatorMachine,
} from "../../../machines/coordinator.machine.ts";

/**
 * MUTANT — a coordinator that clears the doorbell when the interrupted run ENDS instead of when
 * the interrupt arrives, so a wake submitted after the interrupt (while the run was stopping)
 * is dropped. Tests assert that the "an interrupt never clears a later wake" checks FAIL on it.
 */
export const coordinatorInterruptDropsLaterWake = coordinatorMachine.provide({
  actions: {
    recordInterrupted: assign({
      lastOutcome: "interrupted" as const,
      lastError: null,
      pendingWake: null as CoordinatorContext["pendingWake"],
    }),
  },
});
