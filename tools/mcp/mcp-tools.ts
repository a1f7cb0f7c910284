import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type * as McpTypes from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "pino";
import { z } from "zod";
import { durationOption } from "../../contracts/clock.ts";
import type { ToolResult } from "../../contracts/tool-result.ts";
import { defineTool, TOOL_NAME_PATTERN, type Tool } from "../define-tool.ts";
import { jsonSchemaParameters, jsonSchemaPatternProblem } from "../json-schema-parameters.ts";
import type { ToolSource } from "../tool-set.ts";
import type { ToolContext, ToolTraits } from "../types.ts";
import { type McpToolAnnotations, traitsFromAnnotations } from "./annotations.ts";
import { type McpCallFailure, mcpCallFailure, redactUrls } from "./mcp-call-failure.ts";
import { fromMcpResult } from "./mcp-result.ts";
import { loadSdk, type Sdk } from "./mcp-sdk.ts";
import { describeServer, type McpServer, serverName } from "./mcp-server.ts";
import {
  BoundedSchemaValidator,
  checkOutput,
  compileOutput,
  type OutputCheck,
} from "./output-schema.ts";

/** Options of `mcpTools`: naming, timeouts and where the server's problems are reported. */
export interface McpToolsOptions {
  /** Names the server in messages and prefixes its tools whose names are taken. Default: from the command or URL. */
  name?: string;
  /** A call's timeout, restarted by each progress notification (up to `maxCallMs`). Default 600 000 ms. */
  callTimeoutMs?: number;
  /** The longest a call may run however often it reports progress. Default 3 600 000 ms (1 h). */
  maxCallMs?: number;
  /** Connecting and listing tools. Default 30 000 ms. */
  connectTimeoutMs?: number;
  /** Tools of the server offered at most; the rest are left out with a warning. Default 128. */
  maxTools?: number;
  /** Where the server's problems are reported (once each) and a stdio server's stderr goes (debug). */
  logger?: Logger;
  /** Told once when the server is lost, and once when a tool of it cannot be offered. Must not throw. */
  onProblem?: (message: string) => void;
}

/** Thrown by `mcpTools` when the server cannot be started, reached or listed. */
export class McpConnectError extends Error {
  override readonly name = "McpConnectError";
}

/** Longest tool description offered to the model (a server's text is not trusted to be short). */
const MAX_DESCRIPTION_CHARS = 8192;
/** Pages of `tools/list` read at most (a server that pages forever is cut off). */
const MAX_LIST_PAGES = 100;
/** Default of `maxTools`: the most tools one OpenAI request takes. */
const DEFAULT_MAX_TOOLS = 128;

/** `tools/list` as read: each tool is checked on its own, so one bad tool leaves only itself out. */
const ListResult = z.looseObject({
  tools: z.array(z.unknown()),
  nextCursor: z.string().optional(),
});
/** `tools/call` as read: a malformed result is the call's error (`fromMcpResult`), not a lost server. */
const CallResult = z.unknown();

/** A listed tool as Keel reads it (the rest of the definition is checked in `toTool`). */
interface ToolDef {
  name: string;
  description?: unknown;
  title?: unknown;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: McpToolAnnotations;
}

/**
 * Connects to an MCP server (a command spoken to over stdio, or a Streamable HTTP URL with
 * headers for auth), lists its tools and resolves to them as a {@link ToolSource}: pass it in
 * `createAgent({ tools })` or `agent.session(id, { tools })`. Rejects with `McpConnectError`
 * saying what failed. Close it when done (`close()`); the agent does not own it.
 */
export async function mcpTools(
  server: McpServer,
  options: McpToolsOptions = {},
): Promise<McpToolSet> {
  const set = new McpToolSet(server, options);
  await set.connect();
  return set;
}

/**
 * One MCP server's tools. Each tool's JSON Schema becomes its zod schema as a protocol client
 * tool's does (`jsonSchemaParameters`), so repair and validation are the same; its annotations
 * become traits conservatively (`traitsFromAnnotations`). A call sends `tools/call` with the
 * call's signal (a cancel sends `notifications/cancelled`) and a progress token (each
 * `notifications/progress` becomes `ctx.onUpdate`, a `call.updated` event).
 *
 * Lifecycle: `connect()` → up. `notifications/tools/list_changed` marks the list stale; it is
 * read again at the next `refresh()` (a turn's start), never while a turn runs. A server lost
 * (its process exited, its connection closed) is reported once (`onProblem`, logger) and every
 * call until the next `refresh()` fails at once without being sent; `refresh()` reconnects. A
 * call cut by the loss ends `OUTCOME_UNKNOWN` (the server may have acted), unless the tool is
 * idempotent (then it is safe to call again, and the result says so).
 */
export class McpToolSet implements ToolSource {
  readonly name: string;
  private client: Client | undefined;
  private state: "new" | "up" | "down" | "closed" = "new";
  private listed: readonly Tool[] = [];
  private stale = false;
  private lostReason = "";
  private reconnecting: Promise<void> | undefined;
  private probing = false;
  private versionValue = 0;
  private readonly problems = new Set<string>();
  private readonly callTimeoutMs: number;
  private readonly maxCallMs: number;
  private readonly connectTimeoutMs: number;
  private readonly maxTools: number;

  /** Throws a `RangeError` naming a duration option or `maxTools` that is out of range. */
  constructor(
    private readonly server: McpServer,
    private readonly options: McpToolsOptions = {},
  ) {
    this.name = options.name ?? serverName(server);
    const warn = (m: string) => this.report(`option:${m}`, m);
    const duration = (option: keyof McpToolsOptions, fallback: number) =>
      durationOption(`mcpTools: \`${option}\``, options[option], fallback, { warn });
    this.callTimeoutMs = duration("callTimeoutMs", 600_000);
    this.maxCallMs = duration("maxCallMs", 3_600_000);
    this.connectTimeoutMs = duration("connectTimeoutMs", 30_000);
    const maxTools = options.maxTools ?? DEFAULT_MAX_TOOLS;
    if (!Number.isSafeInteger(maxTools) || maxTools < 1)
      throw new RangeError(`mcpTools: \`maxTools\` must be a whole number ≥ 1, got ${maxTools}`);
    this.maxTools = maxTools;
  }

  get version(): number {
    return this.versionValue;
  }

  /** `up` while connected, `down` after the server was lost, `closed` after `close()`. */
  get status(): "new" | "up" | "down" | "closed" {
    return this.state;
  }

  tools(): readonly Tool[] {
    return this.listed;
  }

  /** Starts (or reaches) the server and lists its tools. Rejects with `McpConnectError`. */
  async connect(): Promise<void> {
    if (this.state === "closed") throw new McpConnectError(`MCP server "${this.name}" was closed`);
    const lib = await loadSdk();
    const validator = new BoundedSchemaValidator(lib.AjvJsonSchemaValidator);
    const client = new lib.Client(
      { name: "keel", version: "0.1.0" },
      { capabilities: {}, jsonSchemaValidator: validator },
    );
    const transport =
      "command" in this.server
        ? new lib.StdioClientTransport({
            command: this.server.command,
            args: this.server.args ?? [],
            env: { ...lib.getDefaultEnvironment(), ...(this.server.env ?? {}) },
            cwd: this.server.cwd,
            stderr: "pipe",
          })
        : new lib.StreamableHTTPClientTransport(new URL(this.server.url), {
            requestInit: { headers: { ...(this.server.headers ?? {}) } },
          });
    client.onclose = () => this.lost(client, "its connection closed");
    client.onerror = (err) => {
      this.options.logger?.debug({ err, server: this.name }, "MCP transport error");
      // Over HTTP a dead server shows as a broken stream, not a closed connection: ask it.
      if (this.client === client) this.probe(client);
    };
    const timeout = this.connectTimeoutMs;
    try {
      await client.connect(transport, { timeout });
      if (transport instanceof lib.StdioClientTransport) {
        transport.stderr?.on("data", (chunk: Buffer) =>
          this.options.logger?.debug(
            { server: this.name, stderr: String(chunk) },
            "MCP server stderr",
          ),
        );
      }
      client.setNotificationHandler(lib.types.ToolListChangedNotificationSchema, () => {
        this.stale = true;
      });
      const tools = await this.list(client, timeout, validator);
      this.client = client;
      this.state = "up";
      this.problems.clear();
      this.apply(tools);
    } catch (err) {
      await client.close().catch(() => {});
      throw new McpConnectError(
        `could not connect to MCP server "${this.name}" (${describeServer(this.server)}): ${errorText(err)}`,
      );
    }
  }

  /**
   * Between turns: reconnects a lost server, or reads the tool list again after
   * `list_changed`. Never rejects; a failure is reported once and the old list stays.
   */
  refresh(): Promise<void> {
    this.reconnecting ??= this.doRefresh().finally(() => {
      this.reconnecting = undefined;
    });
    return this.reconnecting;
  }

  private async doRefresh(): Promise<void> {
    if (this.state === "closed") return;
    if (this.state === "down" || this.state === "new") {
      try {
        await this.connect();
        this.options.logger?.info({ server: this.name }, "MCP server reconnected");
      } catch (err) {
        this.report(
          `reconnect:${this.lostReason}`,
          `${errorText(err)}; its tools fail until a later turn reconnects it`,
        );
      }
      return;
    }
    if (!this.stale || !this.client) return;
    this.stale = false;
    try {
      this.apply(
        await this.list(
          this.client,
          this.connectTimeoutMs,
          new BoundedSchemaValidator((await loadSdk()).AjvJsonSchemaValidator),
        ),
      );
    } catch (err) {
      this.report(
        "list",
        `MCP server "${this.name}": could not read its changed tool list: ${errorText(err)}`,
      );
    }
  }

  /** Closes the connection (a stdio server's process ends). Its tools fail from then on. */
  async close(): Promise<void> {
    this.state = "closed";
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => {});
  }

  private apply(tools: readonly Tool[]): void {
    this.listed = tools;
    this.versionValue++;
  }

  /**
   * Reads every page of `tools/list` (at most `MAX_LIST_PAGES`), keeping the first `maxTools`
   * tools that can be offered. A tool that cannot be one is left out alone; a name taken after
   * sanitising gets a suffix (`name_2`); both are said once through `onProblem`.
   */
  private async list(
    client: Client,
    timeout: number,
    validator: BoundedSchemaValidator,
  ): Promise<Tool[]> {
    const tools: Tool[] = [];
    const taken = new Set<string>();
    let over = 0;
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const params = cursor === undefined ? {} : { cursor };
      const result = await client.request({ method: "tools/list", params }, ListResult, {
        timeout,
      });
      for (const def of result.tools) {
        if (tools.length >= this.maxTools) {
          over++;
          continue;
        }
        const tool = this.toTool(def, taken, validator);
        if (!tool) continue;
        taken.add(tool.name);
        tools.push(tool);
      }
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    if (over > 0) {
      this.report(
        "max-tools",
        `MCP server "${this.name}" lists more tools than the ${this.maxTools} offered (option maxTools): ${over} are left out`,
      );
    }
    return tools;
  }

  /** A name for `remote` no other tool of this server has: sanitised, then `_2`, `_3`, … */
  private uniqueName(remote: string, taken: ReadonlySet<string>): string {
    const base = remote.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
    if (!taken.has(base)) return base;
    for (let n = 2; ; n++) {
      const suffix = `_${n}`;
      const name = `${base.slice(0, 64 - suffix.length)}${suffix}`;
      if (taken.has(name)) continue;
      this.report(
        `rename:${remote}`,
        `MCP server "${this.name}": tool ${JSON.stringify(remote.slice(0, 100))} is offered as "${name}": "${base}" is the name of another of its tools once sanitised`,
      );
      return name;
    }
  }

  /** A Keel tool for one listed MCP tool, or undefined (reported once) when it cannot be one. */
  private toTool(
    value: unknown,
    taken: ReadonlySet<string>,
    validator: BoundedSchemaValidator,
  ): Tool | undefined {
    const def = (typeof value === "object" && value !== null ? value : {}) as ToolDef;
    const remote = typeof def.name === "string" ? def.name : "";
    try {
      if (remote === "") throw new Error("it has no name");
      const name = this.uniqueName(remote, taken);
      if (!TOOL_NAME_PATTERN.test(name)) throw new Error("its name has no usable characters");
      const parameters = jsonSchemaParameters(def.inputSchema, "inputSchema", {
        onWarning: (m) => this.report(`patterns:${remote}`, `MCP tool ${remote}: ${m}`),
      });
      const output =
        def.outputSchema === undefined ? undefined : compileOutput(validator, def.outputSchema);
      const traits = traitsFromAnnotations(def.annotations);
      return defineTool({
        name,
        description: describe(def, remote, this.name),
        parameters,
        traits,
        execute: async (args, ctx) => {
          const problem = await jsonSchemaPatternProblem(parameters, args, ctx.signal);
          if (problem === undefined) return this.call(remote, name, args, ctx, traits, output);
          return {
            ok: false,
            code: "INVALID_ARGS",
            message: `not sent: ${problem}. Fix the argument and call ${name} again.`,
            retryable: false,
          };
        },
      });
    } catch (err) {
      this.report(
        `tool:${remote}`,
        `MCP server "${this.name}": tool ${JSON.stringify(remote.slice(0, 100))} is left out: ${errorText(err)}`,
      );
      return undefined;
    }
  }

  private async call(
    remote: string,
    name: string,
    args: unknown,
    ctx: ToolContext,
    traits: ToolTraits,
    output: OutputCheck | undefined,
  ): Promise<ToolResult> {
    const client = this.client;
    if (this.state !== "up" || !client) {
      return {
        ok: false,
        code: "EXECUTION_FAILED",
        message: `not sent: the MCP server "${this.name}" is not connected (${this.lostReason || this.state}), so ${name} did not run. It is reconnected when the next turn starts; call it again then.`,
        retryable: true,
      };
    }
    const lib = await loadSdk();
    let answer: unknown;
    try {
      answer = await client.request(
        {
          method: "tools/call",
          params: { name: remote, arguments: args as Record<string, unknown> },
        },
        CallResult,
        {
          signal: ctx.signal,
          timeout: this.callTimeoutMs,
          resetTimeoutOnProgress: true,
          maxTotalTimeout: this.maxCallMs,
          onprogress: (p) =>
            ctx.onUpdate({
              progress: p.progress,
              ...(p.total !== undefined && { total: p.total }),
              ...(p.message !== undefined && { message: p.message }),
            }),
        },
      );
    } catch (err) {
      // A read-only tool changed nothing: the call is cancelled. Any other may have acted.
      if (ctx.signal.aborted && traits.readOnly) throw err;
      const failure = this.failureOf(err, client, ctx.signal, lib);
      return mcpCallFailure(failure, this.name, name, {
        idempotent: traits.idempotent === true,
      });
    }
    const result = fromMcpResult(answer, name);
    return output ? checkOutput(result, answer, output, name, ctx.signal) : result;
  }

  /**
   * What a thrown `tools/call` means. The server's own JSON-RPC error (any code, -32000
   * included) is its answer: the server stays up. Only a closed connection (the client was
   * already told: `lost` ran) or a failed transport is a lost server.
   */
  private failureOf(err: unknown, client: Client, signal: AbortSignal, lib: Sdk): McpCallFailure {
    if (signal.aborted) return { kind: "cancelled" };
    const fromServer = err instanceof lib.types.McpError;
    if (!fromServer || this.client !== client) {
      this.lost(client, "its connection closed during a call");
      return { kind: "lost", why: this.lostReason };
    }
    const code = (err as McpTypes.McpError).code;
    if (code === lib.types.ErrorCode.RequestTimeout) {
      return { kind: "timeout", detail: errorText(err) };
    }
    return { kind: "refused", code, detail: errorText(err).replace(/^MCP error -?\d+: /, "") };
  }

  /**
   * After a transport error: a ping that fails within 5 s means the server is gone (its
   * pending calls then end as cut by the loss). One probe at a time.
   */
  private probe(client: Client): void {
    if (this.probing) return;
    this.probing = true;
    client
      .ping({ timeout: 5000 })
      .catch((err) => this.lost(client, `it stopped answering (${errorText(err)})`))
      .finally(() => {
        this.probing = false;
      });
  }

  /** The server is gone: said once per loss; calls fail at once until the next refresh. */
  private lost(client: Client, why: string): void {
    if (this.client !== client || this.state !== "up") return;
    this.client = undefined;
    this.state = "down";
    this.lostReason = why;
    this.report(
      `down:${why}`,
      `MCP server "${this.name}" was lost (${why}); its tools fail until it is reconnected when the next turn starts`,
    );
    void client.close().catch(() => {});
  }

  private report(key: string, message: string): void {
    if (this.problems.has(key)) return;
    this.problems.add(key);
    this.options.logger?.warn({ server: this.name }, message);
    try {
      this.options.onProblem?.(message);
    } catch {
      // onProblem must not throw; a throw is not the server's problem.
    }
  }
}

/** An error's message, at most 500 characters, with the URLs in it redacted (`redactUrls`). */
function errorText(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return redactUrls(text.length > 500 ? `${text.slice(0, 500)}…` : text);
}

/** The description offered to the model: the server's (cut to a bound), or one naming the tool. */
function describe(def: ToolDef, remote: string, server: string): string {
  const given = typeof def.description === "string" ? def.description : def.title;
  const text = (typeof given === "string" ? given : "").trim();
  if (text === "") return `Tool ${remote} of the MCP server ${server}.`;
  return text.length > MAX_DESCRIPTION_CHARS ? `${text.slice(0, MAX_DESCRIPTION_CHARS)}…` : text;
}
