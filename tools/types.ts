import type { Logger } from "pino";
import type { z } from "zod";
import type { Risk } from "../contracts/permission.ts";
import type { ToolFailure, ToolResult } from "../contracts/tool-result.ts";

export type { Risk };

/** What happens to output over `maxBytes`: cut with a continuation, or written to a file. */
export interface OutputBudget {
  maxBytes: number;
  overflow: "truncate" | "spill";
}

/**
 * Declared behaviour of a tool. Every trait is optional; a missing or unknown value is read
 * conservatively: not read-only, not concurrency-safe, not idempotent, not cancellable,
 * risk high (low when read-only), parallel execution mode, no resource key (see `resolveTraits`).
 */
export interface ToolTraits<Args = unknown> {
  /**
   * The tool only reads: it changes nothing (no file, process, or remote state). A read-only
   * tool that declares no `risk` gets risk `low`, so the default permission policy allows it
   * without asking; a configured rule (by tool or by risk) still decides first, and a declared
   * `risk` wins (e.g. `risk: "high"` for a tool that reads secrets).
   */
  readOnly?: boolean;
  concurrencySafe?: boolean;
  idempotent?: boolean;
  cancellable?: boolean;
  risk?: Risk;
  outputBudget?: OutputBudget;
  /** "sequential" makes the whole batch it appears in run in call order, one at a time. */
  executionMode?: "parallel" | "sequential";
  /** Calls with the same key never overlap (e.g. the real path of a file being written). */
  resourceKey?: (args: Args) => string | undefined;
}

/** Traits with every default filled in. */
export interface ResolvedTraits {
  readOnly: boolean;
  concurrencySafe: boolean;
  idempotent: boolean;
  cancellable: boolean;
  risk: Risk;
  outputBudget: OutputBudget;
  executionMode: "parallel" | "sequential";
}

/** What a tool's `execute` may return: a plain string is read as `{ ok: true, content }`. */
export type ToolOutput = string | ToolResult;

/** What a tool's `execute` gets beside its arguments. */
export interface ToolContext {
  /** The call's id, as the model gave it. */
  callId: string;
  /** The session the call runs in (tools that read the session, like `read_result`). */
  sessionId: string;
  /** Aborted when the call is cancelled (interrupt, stop deadline). */
  signal: AbortSignal;
  /** Stable per logical operation: the same across retries and crash recovery. */
  idempotencyKey: string;
  /** Progress for the UI. Ignored once the call has settled. */
  onUpdate: (progress: unknown) => void;
  /** A pino logger bound to the call. */
  log: Logger;
  /**
   * With OpenTelemetry on (`createAgent({ telemetry })`): the context of this call's
   * `execute_tool` span. Pass it as the parent of the tool's own spans
   * (`tracer.startSpan(name, {}, ctx.traceContext)`); it is also the active context while
   * `execute` runs. Absent when telemetry is off.
   */
  traceContext?: TraceContext;
}

/**
 * An OpenTelemetry `Context` (`@opentelemetry/api`), described by its shape so that tools need
 * not depend on the package: any value of this type is accepted where the API takes a Context.
 */
export interface TraceContext {
  getValue(key: symbol): unknown;
  setValue(key: symbol, value: unknown): TraceContext;
  deleteValue(key: symbol): TraceContext;
}

/** An example call shown to the model in the tool's description. */
export interface ToolExample {
  description?: string;
  args: Record<string, unknown>;
}

/** What `defineTool` takes: name, description, zod parameters, traits and `execute`. */
// biome-ignore lint/suspicious/noExplicitAny: a registry holds tools of every argument type
export interface ToolDefinition<Args = any> {
  name: string;
  description: string;
  parameters: z.ZodType<Args>;
  /**
   * Example calls: checked against `parameters` by `defineTool`, sent to the model after the
   * description (one compact line each, see `modelDescription`), and quoted in argument errors.
   */
  examples?: ToolExample[];
  /**
   * `false` keeps `examples` out of what the model is sent with every request (they cost
   * tokens on each one); argument errors still quote the first. Default true.
   */
  showExamples?: boolean;
  traits?: ToolTraits<Args>;
  /**
   * Contract: may throw or reject; a throw becomes an `EXECUTION_FAILED` result with the
   * error's message and a short stack summary. Should honour `ctx.signal` when `cancellable`.
   */
  execute: (args: Args, ctx: ToolContext) => Promise<ToolOutput> | ToolOutput;
}

/** A raw tool call as the model emitted it. */
export interface RawToolCall {
  id: string;
  name: string;
  argumentsText: string;
}

/** A call that passed preparation: resolved tool, validated arguments. */
export interface PreparedCall {
  id: string;
  /** The registered tool name (after alias resolution). */
  name: string;
  /** The name the model used. */
  requestedName: string;
  args: unknown;
  argumentsText: string;
  tool: ToolDefinition;
  traits: ResolvedTraits;
  /** `traits.resourceKey(args)`, computed once at preparation. */
  resourceKey?: string;
  /** What preparation noticed, for the log: every repair, and problems of the tool itself. */
  warnings: string[];
  /**
   * How the model's input was read differently from how it was sent (a resolved tool name,
   * renamed or ignored parameters, unwrapped or re-shaped fields, concatenated objects that did
   * not run): each a short phrase that the call's result states (see `withRepairNote`).
   */
  repairs: string[];
}

export type PrepareOutcome =
  | { ok: true; call: PreparedCall }
  | { ok: false; id: string; name: string; argumentsText: string; error: ToolFailure };
