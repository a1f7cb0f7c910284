import { createInterface } from "node:readline/promises";
import { defineTool, type Tool, type ToolDefinition, type ToolResult } from "../index.ts";
import { COLLAPSED_NOTE, shownCall } from "./shown-text.ts";

/**
 * Longest question (characters) asked about a call. Past it the call is denied without asking:
 * no one reads, page by page, arguments that long, and a question whose text the user cannot
 * see must not be asked.
 */
export const MAX_ASKED_CHARS = 16_000;
/** A question longer than this is shown in pages of this many characters, each confirmed. */
export const PAGE_CHARS = 1_500;

/**
 * Asks whether a call may run. `question` is the whole text the user must read (the tool and
 * all of its arguments); showing only part of it is not allowed.
 * Contract: resolves true (allow) or false (deny); resolves false when `signal` aborts; never
 * rejects.
 */
export type Ask = (question: string, signal: AbortSignal) => Promise<boolean>;

export interface ApprovalOptions {
  /** Asks on the terminal; absent → high-risk calls are denied (unless `yes`). */
  ask?: Ask;
  /** Allow every call without asking (`--yes`), but those of `askAlways`. */
  yes?: boolean;
  /**
   * Tools asked about before every call, `--yes` or not (`shell` when it cannot be sandboxed),
   * with why: without a terminal their calls are denied saying so.
   */
  askAlways?: { tools: readonly string[]; why: string };
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
  const always = options.askAlways?.tools ?? [];
  if (options.yes && always.length === 0) return [...tools];
  let queue: Promise<unknown> = Promise.resolve();
  const askInTurn = (question: string, signal: AbortSignal) => {
    const ask = options.ask;
    if (!ask) return Promise.resolve(false);
    const answer = queue.then(() => (signal.aborted ? false : ask(question, signal)));
    queue = answer.catch(() => false);
    return answer.catch(() => false);
  };
  return tools.map((tool) => {
    const askedAlways = always.includes(tool.name);
    if (!askedAlways && (options.yes || tool.resolvedTraits.risk !== "high")) return tool;
    const { jsonSchema: _schema, resolvedTraits: _traits, ...definition } = tool;
    return defineTool({
      ...definition,
      async execute(args, ctx) {
        if (!options.ask)
          return denied(
            tool.name,
            askedAlways
              ? `${options.askAlways!.why}, so each call is asked and there is no terminal to ask`
              : "high-risk tools need --yes when there is no terminal",
          );
        const question = approvalQuestion(tool.name, args);
        if (question.length > MAX_ASKED_CHARS)
          return denied(
            tool.name,
            `its arguments are too long to show at the prompt (${question.length} characters, over ${MAX_ASKED_CHARS}); split the work into smaller calls, or run with --yes`,
          );
        const ok = await askInTurn(question, ctx.signal);
        if (!ok) return denied(tool.name, "refused at the prompt");
        return tool.execute(args, ctx);
      },
    });
  });
}

/**
 * The question asked about a call: the tool and its whole arguments (see `shownCall`: never
 * cut, runs of spaces counted, control characters escaped), with a note when spaces were
 * counted. This is a pure function.
 */
export function approvalQuestion(tool: string, args: unknown): string {
  const shown = shownCall(args);
  return `Allow ${tool} ${shown.text}?${shown.collapsed ? `\n${COLLAPSED_NOTE}` : ""} [y/N] `;
}

/** `question` in pages of at most `size` characters (cut at a line end when one is near). */
export function pages(question: string, size = PAGE_CHARS): string[] {
  const out: string[] = [];
  let at = 0;
  while (question.length - at > size) {
    const nl = question.lastIndexOf("\n", at + size);
    const end = nl > at + size / 2 ? nl + 1 : at + size;
    out.push(question.slice(at, end));
    at = end;
  }
  out.push(question.slice(at));
  return out;
}

/**
 * Asks y/n on the terminal (stdin/stderr); anything but y/yes is a no. A question longer than
 * a page is shown page by page: each page waits for Enter (anything else typed there is a no),
 * and y/n is asked only once the last page is on the screen.
 */
export function terminalAsk(input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Ask {
  return async (question, signal) => {
    const rl = createInterface({ input, output, terminal: true });
    try {
      const parts = pages(question);
      for (const [i, page] of parts.slice(0, -1).entries()) {
        const more = await rl.question(
          `\n${page}\n-- page ${i + 1} of ${parts.length}: Enter for more, n to refuse --`,
          { signal },
        );
        if (more.trim() !== "") return false;
      }
      const answer = await rl.question(`\n${parts[parts.length - 1]}`, { signal });
      return /^y(es)?$/i.test(answer.trim());
    } catch {
      return false;
    } finally {
      rl.close();
    }
  };
}
