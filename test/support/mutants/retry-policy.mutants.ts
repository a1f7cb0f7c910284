import type { ModelError } from "../../../contracts/model.ts";
import {
  decideRetry,
  initialRetryState,
  type RetryDecision,
  type RetryInput,
  type RetryPolicy,
  type RetryState,
  remainingWait,
} from "../../../machines/policies/retry-policy.ts";

/** What the invariant-7 property (test/retry-policy.clock.test.ts) drives; mutants swap a part. */
export interface PolicyImpl {
  initial(policy: Partial<RetryPolicy>, startedAt: number): RetryState;
  decide(state: RetryState, input: RetryInput): RetryDecision;
  remaining(state: RetryState, now: number): number;
}

export const realPolicy: PolicyImpl = {
  initial: initialRetryState,
  decide: decideRetry,
  remaining: remainingWait,
};

/** Broken on purpose: every layer waits the whole decided delay again (waited twice). */
export function reAddsDelay(): PolicyImpl {
  let delay = 0;
  return {
    ...realPolicy,
    decide: (s, input) => {
      const d = decideRetry(s, input);
      if (d.action !== "stop") delay = d.delayMs;
      return d;
    },
    remaining: () => delay,
  };
}

/** Broken on purpose: a `Retry-After: 0` resets the retry count, so maxRetries never ends it. */
export const ignoresMaxRetriesOnZero: PolicyImpl = {
  ...realPolicy,
  decide: (s, input) => {
    const ra = (input.error as ModelError).headers["retry-after"];
    return decideRetry(ra === "0" ? { ...s, retries: 0 } : s, input);
  },
};

/** Broken on purpose: forgets the operation deadline, so a wait may cross it. */
export const ignoresDeadline: PolicyImpl = {
  ...realPolicy,
  decide: (s, input) => decideRetry({ ...s, deadline: undefined }, input),
};

/** Broken on purpose: converts Retry-After at a later clock reading (extends the wait). */
export const reParsesLater: PolicyImpl = {
  ...realPolicy,
  decide: (s, input) => decideRetry(s, { ...input, now: input.now + 1000 }),
};
