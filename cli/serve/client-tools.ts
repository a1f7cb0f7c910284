import type { z } from "zod";
import { MAX_TIMER_MS } from "../../contracts/clock.ts";
import type { ClientToolSpec } from "../../contracts/protocol.ts";
import {
  defineTool,
  jsonSchemaParameters,
  jsonSchemaPatternProblem,
  type Tool,
  type ToolResult,
  type ToolTraits,
} from "../../index.ts";
import { ControlFailure } from "./control.ts";
import { ProtocolError } from "./protocol-error.ts";

/** Sends one `tool.execute` and returns its id and the client's answer (see ControlChannel). */
export type ExecuteRemote = (params: {
  callId: string;
  tool: string;
  args: unknown;
  idempotencyKey: string;
  timeoutMs: number;
}) => { id: string; result: Promise<unknown> };

export interface ClientToolDeps {
  execute: ExecuteRemote;
  /** Tells the client to abort a running `tool.execute`. Contract: must not throw. */
  cancel: (id: string, reason: string) => void;
  /** Reports a reply that is not a tool result (an `INVALID_REPLY` frame). Must not throw. */
  invalidReply: (id: string, message: string) => void;
  defaultTimeoutMs: number;
}

/** Client tools one `session.open` may declare (an OpenAI request takes at most 128). */
export const MAX_CLIENT_TOOLS = 128;
/** Schema objects one client tool's `parameters` may hold (its properties, items, …, nested). */
export const MAX_SCHEMA_NODES = 2000;

/**
 * The client tools of one `session.open`, each made with {@link clientTool}. Bounded so that one
 * request cannot hold the event loop (docs/architecture.md, invariant 16): at most `MAX_CLIENT_TOOLS` tools, each of
 * at most `MAX_SCHEMA_NODES` schema objects, and the loop gets a turn between two tools, so a
 * stall is one tool's conversion at most. Rejects with `ProtocolError` (`INVALID_TOOL`) naming
 * the limit.
 */
export async function clientTools(specs: unknown, deps: ClientToolDeps): Promise<Tool[]> {
  if (specs === undefined) return [];
  if (!Array.isArray(specs)) throw new ProtocolError("INVALID_TOOL", '"tools" must be an array');
  if (specs.length > MAX_CLIENT_TOOLS) {
    throw new ProtocolError(
      "INVALID_TOOL",
      `"tools" has ${specs.length} tools; a session takes at most ${MAX_CLIENT_TOOLS}. Offer fewer tools (or split them between sessions)`,
    );
  }
  const tools: Tool[] = [];
  for (const [i, spec] of specs.entries()) {
    const nodes = schemaNodes((spec as { parameters?: unknown } | null)?.parameters);
    if (nodes > MAX_SCHEMA_NODES) {
      throw new ProtocolError(
        "INVALID_TOOL",
        `tools[${i}]: "parameters" has over ${MAX_SCHEMA_NODES} schema objects; a tool's schema takes at most ${MAX_SCHEMA_NODES}. Simplify it`,
      );
    }
    if (i > 0) await new Promise((resolve) => setImmediate(resolve));
    tools.push(clientTool(spec, i, deps));
  }
  return tools;
}

/** Objects in `value` (a JSON Schema), counted up to one past `MAX_SCHEMA_NODES`. Linear. */
function schemaNodes(value: unknown): number {
  let count = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && count <= MAX_SCHEMA_NODES) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    if (!Array.isArray(node)) count++;
    for (const child of Object.values(node)) stack.push(child);
  }
  return count;
}

const RISKS = new Set(["low", "medium", "high"]);
const BOOLEAN_TRAITS = ["readOnly", "concurrencySafe", "idempotent", "cancellable"] as const;

/**
 * A tool the client runs: its JSON Schema becomes a zod schema (`jsonSchemaParameters`, as for MCP tools), so the
 * model's arguments go through the same preparation and validation as any tool's, and its
 * execution is a `tool.execute` control request. Its result goes through the same output
 * budget and write-ahead records. Throws `ProtocolError` (`INVALID_TOOL`) naming what is wrong
 * with the declaration.
 */
export function clientTool(spec: unknown, index: number, deps: ClientToolDeps): Tool {
  const where = `tools[${index}]`;
  const bad = (message: string): never => {
    throw new ProtocolError("INVALID_TOOL", `${where}: ${message}`);
  };
  if (typeof spec !== "object" || spec === null) bad("must be an object");
  const s = spec as Partial<ClientToolSpec>;
  if (typeof s.name !== "string") bad('needs a string "name"');
  if (typeof s.description !== "string") bad(`("${s.name}") needs a string "description"`);
  const label = `${where} ("${s.name}")`;
  let parameters: z.ZodObject;
  try {
    parameters = jsonSchemaParameters(s.parameters);
  } catch (err) {
    throw new ProtocolError("INVALID_TOOL", `${label}: ${(err as Error).message}`);
  }
  const traits = checkTraits(s.traits, label);
  const timeoutMs = s.timeoutMs ?? deps.defaultTimeoutMs;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMER_MS) {
    bad(
      `"timeoutMs" must be an integer from 1 to ${MAX_TIMER_MS} (milliseconds; 2^31 − 1 is the longest timer, a longer one would fire at once), got ${String(s.timeoutMs)}`,
    );
  }
  const name = s.name as string;
  try {
    return defineTool({
      name,
      description: s.description as string,
      parameters,
      traits,
      async execute(args, ctx): Promise<ToolResult> {
        // The schema's patterns are matched in the pattern worker, never on the event loop.
        const problem = await jsonSchemaPatternProblem(parameters, args, ctx.signal);
        if (problem !== undefined) {
          return {
            ok: false,
            code: "INVALID_ARGS",
            message: `not sent: ${problem}. Fix the argument and call ${name} again.`,
            retryable: false,
          };
        }
        const sent = deps.execute({
          callId: ctx.callId,
          tool: name,
          args,
          idempotencyKey: ctx.idempotencyKey,
          timeoutMs,
        });
        const onAbort = () => deps.cancel(sent.id, "the call was cancelled");
        ctx.signal.addEventListener("abort", onAbort, { once: true });
        try {
          return readResult(await sent.result, sent.id, name, deps);
        } catch (err) {
          if (!(err instanceof ControlFailure)) throw err;
          return failureResult(err, sent.id, name, ctx.signal);
        } finally {
          ctx.signal.removeEventListener("abort", onAbort);
        }
      },
    });
  } catch (err) {
    throw new ProtocolError("INVALID_TOOL", `${label}: ${(err as Error).message}`);
  }
}

function checkTraits(value: unknown, label: string): ToolTraits {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null) {
    throw new ProtocolError("INVALID_TOOL", `${label}: "traits" must be an object`);
  }
  const t = value as Record<string, unknown>;
  for (const key of Object.keys(t)) {
    const known = [...BOOLEAN_TRAITS, "risk", "outputBudget", "executionMode"];
    if (!known.includes(key)) {
      throw new ProtocolError(
        "INVALID_TOOL",
        `${label}: unknown trait "${key}"; traits are ${known.join(", ")}`,
      );
    }
  }
  for (const key of BOOLEAN_TRAITS) {
    if (t[key] !== undefined && typeof t[key] !== "boolean") {
      throw new ProtocolError("INVALID_TOOL", `${label}: trait "${key}" must be true or false`);
    }
  }
  if (t.risk !== undefined && !RISKS.has(t.risk as string)) {
    throw new ProtocolError(
      "INVALID_TOOL",
      `${label}: trait "risk" must be "low", "medium" or "high", got ${JSON.stringify(t.risk)}`,
    );
  }
  if (
    t.executionMode !== undefined &&
    t.executionMode !== "parallel" &&
    t.executionMode !== "sequential"
  ) {
    throw new ProtocolError(
      "INVALID_TOOL",
      `${label}: trait "executionMode" must be "parallel" or "sequential"`,
    );
  }
  const budget = t.outputBudget as Record<string, unknown> | undefined;
  if (
    budget !== undefined &&
    (typeof budget !== "object" ||
      budget === null ||
      !Number.isSafeInteger(budget.maxBytes) ||
      (budget.maxBytes as number) < 1 ||
      (budget.overflow !== "truncate" && budget.overflow !== "spill"))
  ) {
    throw new ProtocolError(
      "INVALID_TOOL",
      `${label}: trait "outputBudget" must be {"maxBytes": <positive integer>, "overflow": "truncate" | "spill"}`,
    );
  }
  return t as ToolTraits;
}

/** The client's `ok` result as a tool result: a string, or a well-formed `ToolResult`. */
function readResult(value: unknown, id: string, tool: string, deps: ClientToolDeps): ToolResult {
  if (typeof value === "string") return { ok: true, content: value };
  const r = value as Record<string, unknown> | null;
  if (r && r.ok === true && typeof r.content === "string") {
    return { ok: true, content: r.content };
  }
  if (r && r.ok === false && typeof r.message === "string") {
    return {
      ok: false,
      code: "EXECUTION_FAILED",
      message: typeof r.code === "string" ? `${r.code}: ${r.message}` : r.message,
      retryable: r.retryable === true,
    };
  }
  const message = `the reply to tool.execute ${id} (${tool}) is not a tool result: send a string, {"ok":true,"content":"…"} or {"ok":false,"message":"…"}`;
  deps.invalidReply(id, message);
  return { ok: false, code: "EXECUTION_FAILED", message, retryable: false };
}

/** What a call whose request ended without an `ok` reply reports (see docs/protocol.md). */
function failureResult(
  err: ControlFailure,
  id: string,
  tool: string,
  signal: AbortSignal,
): ToolResult {
  switch (err.kind) {
    case "remote":
      // The client honoured the cancel: the call settles as cancelled (thrown while aborted).
      if (signal.aborted && err.code === "CANCELLED") throw err;
      return { ok: false, code: "EXECUTION_FAILED", message: err.message, retryable: false };
    case "timeout":
      return {
        ok: false,
        code: "TIMEOUT",
        message: `${err.message}; whether ${tool} ran is unknown. Check its effects before retrying.`,
        retryable: false,
      };
    case "closed":
    case "withdrawn":
      return {
        ok: false,
        code: "OUTCOME_UNKNOWN",
        message: `${err.message} before the client answered tool.execute ${id}; whether ${tool} ran is unknown. Check its effects before retrying.`,
        retryable: false,
      };
    default: {
      const never: never = err.kind;
      return never;
    }
  }
}
