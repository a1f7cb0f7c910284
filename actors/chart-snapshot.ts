import { type AnyActorRef, matchesState, type StateValue } from "xstate";

/** `MachineSnapshot.matches`: whether the state is `parentValue` or inside it. */
function matches(this: { value: StateValue }, parentValue: StateValue): boolean {
  return matchesState(parentValue, this.value);
}

/** The charts declare no tags. */
function hasTag(_tag: string): boolean {
  return false;
}

function toJSON(this: ChartSnapshot<unknown, unknown>) {
  return {
    status: this.status,
    output: this.output,
    error: this.error,
    value: this.value,
    context: this.context,
    children: this.children,
    tags: [] as string[],
  };
}

/**
 * The snapshot a hand-compiled chart (`turnLogic`, `batchLogic`, `toolCallLogic`) shows: the
 * fields of an XState machine snapshot that readers use (`status`, `output`, `error`, `value`,
 * `context`, `children`) and its `matches`, `hasTag` and `toJSON`. Not `can` (that would
 * evaluate the chart) and no `historyValue` (the charts have no history states).
 * The methods are own properties, as on a machine snapshot, so they survive the copy XState
 * makes of a snapshot when an effect throws (`{ ...snapshot, status: "error" }`).
 */
export class ChartSnapshot<TContext, TOutput> {
  readonly matches = matches;
  readonly hasTag = hasTag;
  readonly toJSON = toJSON;
  constructor(
    readonly status: "active" | "done" | "error" | "stopped",
    readonly output: TOutput | undefined,
    readonly error: unknown,
    readonly value: StateValue,
    readonly context: TContext,
    readonly children: Record<string, AnyActorRef>,
  ) {}
}

/**
 * `s` ended (`"stopped"`, or `"error"` with `error`), with its children stopped once the event is
 * handled (they may still be running), as XState ends a machine. Same class as `s`.
 */
export function endedSnapshot<S extends ChartSnapshot<unknown, unknown>>(
  s: S,
  status: "stopped" | "error",
  error: unknown,
  scope: { defer: (fn: () => void) => void; stopChild: (child: AnyActorRef) => void },
): S {
  for (const child of Object.values(s.children)) scope.defer(() => scope.stopChild(child));
  const copy = Object.create(Object.getPrototypeOf(s)) as S;
  return Object.assign(copy, s, { status, error, children: {} });
}
