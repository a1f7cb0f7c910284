import { createInterface } from "node:readline/promises";
import { defineTool, type Tool, type ToolDefinition, type ToolResult } from "../index.ts";

/**
 * Asks whether a call may run. Contract: resolves true (allow) or false (deny); resolves
 * false when `signal` aborts; never rejects.
 */
export type Ask = (question: string, signal: AbortSignal) => Promise<boolean>;

export interface ApprovalOptions {
  /** Asks on the terminal; absent → high-risk calls are denied (unless `yes`). */
  ask?: Ask;
  /** Allow every call without asking (`--yes`). */
  yes?: boolean;
}

const denied = (name: string, why: string): ToolResult => ({
  ok: false,
  code: "DENIED",
  message: `The user did not allow ${name} to run (${why}). Do not retry it; ask the user or choose another approach.`,
  retryable: false,
});

/**
 * Wraps every tool whose resolved risk is "high" (a missing risk counts as high) so that its
 * `execute` first asks for approval and returns a `DENIED` result when refused. Questions are
 * asked one at a time even when calls run in parallel. Other tools are returned unchanged.
 */
export function withApproval(tools: readonly Tool[], options: ApprovalOptions): ToolDefinition[] {
  if (options.yes) return [...tools];
  let queue: Promise<unknown> = Promise.resolve();
  const askInTurn = (question: string, signal: AbortSignal) => {
    const ask = options.ask;
    if (!ask) return Promise.resolve(false);
    const answer = queue.then(() => (signal.aborted ? false : ask(question, signal)));
    queue = answer.catch(() => false);
    return answer.catch(() => false);
  };
  return tools.map((tool) => {
    if (tool.resolvedTraits.risk !== "high") return tool;
    const { jsonSchema: _schema, resolvedTraits: _traits, ...definition } = tool;
    return defineTool({
      ...definition,
      async execute(args, ctx) {
        if (!options.ask)
          return denied(tool.name, "high-risk tools need --yes when there is no terminal");
        const shown = JSON.stringify(args);
        const ok = await askInTurn(
          `Allow ${tool.name} ${shown.length > 300 ? `${shown.slice(0, 299)}…` : shown}? [y/N] `,
          ctx.signal,
        );
        if (!ok) return denied(tool.name, "refused at the prompt");
        return tool.execute(args, ctx);
      },
    });
  });
}

/** Asks y/n on the terminal (stdin/stderr); anything but y/yes is a no. */
export function terminalAsk(input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Ask {
  return async (question, signal) => {
    const rl = createInterface({ input, output, terminal: true });
    try {
      const answer = await rl.question(`\n${question}`, { signal });
      return /^y(es)?$/i.test(answer.trim());
    } catch {
      return false;
    } finally {
      rl.close();
    }
  };
}
