import type { ToolResult } from "../contracts/tool-result.ts";
import {
  applyOutputBudget,
  boundFailure,
  errorToResult,
  toToolResult,
  withRepairNote,
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
 * tool honoured the cancel). The call's `repairs` (how preparation read the model's input) end
 * the result in one line (`withRepairNote`). Never throws; resolves exactly once.
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
    /** `PreparedCall.repairs`: stated in the result so the model knows what ran. */
    repairs?: readonly string[];
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
    const noted = withRepairNote(result, options.repairs ?? []);
    return { type: result.ok ? "call.complete" : "call.fail", result: noted };
  } catch (err) {
    if (ctx.signal.aborted) return { type: "call.aborted" };
    const failure = boundFailure(errorToResult(err), options.budget.maxBytes);
    return { type: "call.fail", result: withRepairNote(failure, options.repairs ?? []) };
  }
}
