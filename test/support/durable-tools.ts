import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { defineTool } from "../../tools/define-tool.ts";

/**
 * Tools for durable-wait tests: `mark` (high risk, NOT idempotent) appends a line to
 * `<dir>/marker.log`, then `afterEffect`; `look` (low risk) returns a fixed text the model must
 * see after a crash.
 */
export function durableTools(options: { dir: string; afterEffect: () => Promise<unknown> }) {
  const mark = defineTool({
    name: "mark",
    description: "Writes a marker line (a side effect that must not happen twice).",
    parameters: z.object({ label: z.string() }),
    traits: { risk: "high" },
    execute: async ({ label }) => {
      appendFileSync(join(options.dir, "marker.log"), `${label}\n`);
      await options.afterEffect();
      return `marked ${label}`;
    },
  });
  const look = defineTool({
    name: "look",
    description: "Looks around.",
    parameters: z.object({}),
    traits: { risk: "low", readOnly: true },
    execute: () => "the first step saw a red door",
  });
  return [mark, look];
}
