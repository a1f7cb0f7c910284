import { coordinatorMachine } from "../../../machines/coordinator.machine.ts";

/**
 * MUTANT — a coordinator that drops a wake while a runner is active: the doorbell never rings,
 * so an input that arrives during the runner's last drain or its cleanup is stranded. This is a
 * self-loop bug (`running --wake--> running`), invisible to simple/shortest path coverage.
 * Tests assert that the no-lost-wake-up checks FAIL on it.
 */
export const coordinatorDropsWake = coordinatorMachine.provide({
  actions: { ringDoorbell: () => {} },
});
