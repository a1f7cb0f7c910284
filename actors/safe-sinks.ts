import type { Logger } from "pino";
import type { AgentEvent } from "../contracts/events.ts";
import type { InspectSink } from "./events.ts";

/**
 * The agent's sinks (an inspector's `InspectSink`, telemetry) as the sessions call them: a sink
 * that throws is logged (once per sink) and skipped, never thrown into the turn or the input
 * that emitted the event (invariant 15 of docs/architecture.md: sinks and listeners can never
 * fail a turn or an input). `publish` is absent when no sink is on.
 */
export function safeSinks(
  inspect: InspectSink | undefined,
  traces: { publish(e: AgentEvent): void } | undefined,
  logger: Logger,
): {
  publish: ((e: AgentEvent) => void) | undefined;
  observe: InspectSink["observe"] | undefined;
} {
  const toInspect = inspect && guarded((e: AgentEvent) => inspect.publish(e), logger, "inspect");
  const toTraces = traces && guarded((e: AgentEvent) => traces.publish(e), logger, "telemetry");
  const both = toInspect && toTraces;
  return {
    publish: both
      ? (e) => {
          toInspect(e);
          toTraces(e);
        }
      : (toInspect ?? toTraces),
    observe: inspect && guarded((ev) => inspect.observe(ev), logger, "inspect"),
  };
}

function guarded<A>(call: (a: A) => void, logger: Logger, sink: string): (a: A) => void {
  let told = false;
  return (a) => {
    try {
      call(a);
    } catch (err) {
      if (told) return;
      told = true;
      logger.warn(
        { err, sink },
        "an event sink threw; its events are skipped, the session goes on",
      );
    }
  };
}
