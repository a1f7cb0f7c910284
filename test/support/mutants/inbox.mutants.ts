import { type DrainPolicy, lanesToDrain } from "../../../machines/policies/inbox.ts";

// Broken drain policies (docs/architecture.md). The interleaving search in test/inbox.race.test.ts must
// catch each, and a real session given one (createAgent's lanesToDrain seam) must break.

/** MUTANT: drains steering at every point, including between a call and its result. */
export const drainsSteerAnywhere: DrainPolicy = (point) => {
  const lanes = lanesToDrain(point);
  return lanes.includes("next-step") ? lanes : [...lanes, "next-step"];
};
/** MUTANT: reads follow-ups at every point where it reads anything, not only between turns. */
export const followUpsMidTurn: DrainPolicy = (point) => {
  const lanes = lanesToDrain(point);
  return lanes.length > 0 && !lanes.includes("next-turn") ? [...lanes, "next-turn"] : lanes;
};
/** MUTANT: never polls again after a slow preparation. */
export const noPollAfterPreparation: DrainPolicy = (point) =>
  point.type === "step.prepared" ? ["interrupt"] : lanesToDrain(point);
