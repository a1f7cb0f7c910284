import type { ToolResult } from "../contracts/tool-result.ts";
import {
  applyOutputBudget,
  boundFailure,
  errorToResult,
  toToolResult,
} from "../tools/tool-output.ts";
import type { OutputBudget, ToolContext, ToolDefinition } from "../tools/types.ts";
import { withCallSpan } from "./call-scope.ts";

/** How one execution ended, as the tool-call statechart's event. */
export type ToolReport =
  | { type: "call.complete" | "call.fail"; result: ToolResult }
  | { type: "call.aborted" };

/**
 * Runs a tool once with its context: the output becomes a `ToolResult` within the output budget
 * (failures too); a throw becomes `EXECUTION_FAILED` within the same budget, or `call.aborted` when the call's signal was aborted (the
 * tool honoured the cancel). Never throws; resolves exactly once.
 */
export async function runTool(
  tool: ToolDefinition,
  args: unknown,
  ctx: ToolContext,
  options: {
    name: string;
    budget: OutputBudget;
    /** Writes an output over an `overflow: "spill"` budget to a file (see `createSpill`). */
    spill?: (content: string, callId: string) => Promise<{ path: string; sha256: string }>;
  },
): Promise<ToolReport> {
  try {
    // With telemetry on, the tool runs inside its call's span (its own spans nest under it).
    const output = await withCallSpan(ctx, (scoped) => tool.execute(args, scoped));
    const spill = options.spill;
    const result = await applyOutputBudget(toToolResult(output, options.name), options.budget, {
      toolName: options.name,
      args,
      spill: spill && ((content) => spill(content, ctx.callId)),
    });
    return { type: result.ok ? "call.complete" : "call.fail", result };
  } catch (err) {
    if (ctx.signal.aborted) return { type: "call.aborted" };
    return { type: "call.fail", result: boundFailure(errorToResult(err), options.budget.maxBytes) };
  }
}
