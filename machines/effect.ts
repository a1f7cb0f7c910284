const EFFECT = Symbol.for("keel.effect");

/**
 * Declares an effect in a chart's `setup({ actions })`: a named action that does nothing in the
 * chart itself and is performed by the runtime. `actors/charts.ts` binds every action declared
 * this way to the method of the same name on the turn's effects object (`TurnEffects`), called
 * with the actor it runs in and its params, so adding an effect to a chart needs no edit there.
 * Tests and searches run the chart with these no-ops (`transition()` records them as actions).
 */
export function effect<P = undefined>(): (_: unknown, params: P) => void {
  return Object.assign((_: unknown, _params: P) => {}, { [EFFECT]: true });
}

/** Whether an action implementation was declared with {@link effect}. */
export function isEffect(action: unknown): boolean {
  return typeof action === "function" && (action as { [EFFECT]?: true })[EFFECT] === true;
}
