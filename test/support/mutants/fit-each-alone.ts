import { type FitInput, type FitPlan, planFit } from "../../../session/fit-request.ts";

/**
 * MUTANT — no batch-wide room: each message is judged alone against half of what the model
 * takes (`half`), as the clip of one oversized message did before invariant 21 of docs/architecture.md. Results that
 * are only over the window together are never offloaded, so the request goes out too large, or
 * not at all. Tests assert the request-fits property FAILS with it.
 */
export function fitEachAlone(half: number): (input: FitInput) => FitPlan {
  return (input) => {
    const estimate = input.estimate;
    return planFit({ ...input, estimate: (m) => (estimate(m) > half ? estimate(m) : 0) });
  };
}
