/**
 * The step workload of the extras that drive Keel through its public API (ab, leak, retained):
 * the `touch` tool and a scripted model that asks for `callsPerStep` calls per step for `steps`
 * steps, then answers with text. `keel` is a Keel module (this checkout's or another's), so two
 * versions can run the same workload.
 */
import { z } from "zod";
import { workload } from "../lib/workload.ts";

type Keel = typeof import("../../index.ts");

/** The trivial tool every step calls: `touch {path}` → "ok". */
export function touchTool(keel: Keel) {
  return keel.defineTool({
    name: workload.toolName,
    description: workload.toolDescription,
    parameters: z.object({ path: z.string() }),
    traits: { concurrencySafe: true, readOnly: true, risk: "low" },
    execute: async () => workload.toolResult,
  });
}

/**
 * A model for one prompt of `steps` steps; call ids are `call_<tag>_<step>_<i>` (give each
 * prompt its own tag where ids must be unique across prompts, as real providers' are).
 */
export function stepModel(keel: Keel, steps: number, callsPerStep: number, tag = "") {
  return keel.scriptedModel(
    (_request, index) =>
      index >= steps
        ? { text: workload.finalText }
        : {
            toolCalls: Array.from({ length: callsPerStep }, (_, i) => ({
              id: `call_${tag}${index}_${i}`,
              name: workload.toolName,
              arguments: workload.argsJson,
            })),
          },
    { record: "none" },
  );
}

/**
 * One prompt of `steps` steps of `callsPerStep` `touch` calls on a fresh agent (the memory store
 * unless `store` is given): µs per step, wall and CPU (the process's, GC threads included).
 */
export async function timedPrompt(
  keel: Keel,
  steps: number,
  callsPerStep: number,
  options: { logger: import("pino").Logger; touch: ReturnType<typeof touchTool>; store?: unknown },
): Promise<{ wall: number; cpu: number }> {
  const agent = keel.createAgent({
    model: stepModel(keel, steps, callsPerStep),
    tools: [options.touch],
    store: (options.store as ReturnType<Keel["memoryStore"]> | undefined) ?? keel.memoryStore(),
    limits: { maxSteps: steps + 1 },
    maxParallelToolCalls: 8,
    logger: options.logger,
  });
  const start = performance.now();
  const cpu = process.cpuUsage();
  const out = await agent.session().prompt("go");
  const used = process.cpuUsage(cpu);
  if (out.status !== "completed") throw new Error(`prompt ended ${out.status}`);
  return {
    wall: ((performance.now() - start) * 1000) / steps,
    cpu: (used.user + used.system) / steps,
  };
}
