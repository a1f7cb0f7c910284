import { createRequire } from "node:module";
import type * as McpClient from "@modelcontextprotocol/sdk/client/index.js";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type * as McpStdio from "@modelcontextprotocol/sdk/client/stdio.js";
import type * as McpHttp from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type * as McpTypes from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "pino";
import { loadPeer } from "../../contracts/optional-peer.ts";
import type { ToolResult } from "../../contracts/tool-result.ts";
import { defineTool, TOOL_NAME_PATTERN, type Tool } from "../define-tool.ts";
import { jsonSchemaParameters } from "../json-schema-parameters.ts";
import type { ToolSource } from "../tool-set.ts";
import type { ToolContext, ToolTraits } from "../types.ts";
import { type McpToolAnnotations, traitsFromAnnotations } from "./annotations.ts";
import { fromMcpResult } from "./mcp-result.ts";
import { describeServer, type McpServer, serverName } from "./mcp-server.ts";

const require = createRequire(import.meta.url);

/** Options of `mcpTools`: naming, timeouts and where the server's problems are reported. */
export interface McpToolsOptions {
  /** Names the server in messages and prefixes its tools whose names are taken. Default: from the command or URL. */
  name?: string;
  /** A call's timeout, restarted by each progress notification. Default 600 000 ms. */
  callTimeoutMs?: number;
  /** Connecting and listing tools. Default 30 000 ms. */
  connectTimeoutMs?: number;
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

type Sdk = {
  Client: typeof McpClient.Client;
  StdioClientTransport: typeof McpStdio.StdioClientTransport;
  getDefaultEnvironment: typeof McpStdio.getDefaultEnvironment;
  StreamableHTTPClientTransport: typeof McpHttp.StreamableHTTPClientTransport;
  types: typeof McpTypes;
};
let sdk: Sdk | undefined;
/**
 * The SDK, loaded on first use: `import "keel"` costs nothing for an agent without MCP. Not
 * cached on failure: installed later in the same process, the next call finds it.
 */
async function loadSdk(): Promise<Sdk> {
  if (sdk) return sdk;
  const feature = "MCP tools (mcpTools())";
  const part = <T>(subpath: string) =>
    loadPeer<T>(require, "@modelcontextprotocol/sdk", feature, subpath);
  const client = part<{ Client: Sdk["Client"] }>("client/index.js");
  const stdio =
    part<Pick<Sdk, "StdioClientTransport" | "getDefaultEnvironment">>("client/stdio.js");
  const http = part<Pick<Sdk, "StreamableHTTPClientTransport">>("client/streamableHttp.js");
  sdk = {
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    getDefaultEnvironment: stdio.getDefaultEnvironment,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    types: part<Sdk["types"]>("types.js"),
  };
  return sdk;
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

  constructor(
    private readonly server: McpServer,
    private readonly options: McpToolsOptions = {},
  ) {
    this.name = options.name ?? serverName(server);
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
    const client = new lib.Client({ name: "keel", version: "0.1.0" }, { capabilities: {} });
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
    const timeout = this.options.connectTimeoutMs ?? 30_000;
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
      const tools = await this.list(client, timeout);
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
      this.apply(await this.list(this.client, this.options.connectTimeoutMs ?? 30_000));
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

  private async list(client: Client, timeout: number): Promise<Tool[]> {
    const tools: Tool[] = [];
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const result = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout });
      for (const def of result.tools) {
        const tool = this.toTool(def);
        if (!tool || seen.has(tool.name)) continue;
        seen.add(tool.name);
        tools.push(tool);
      }
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    return tools;
  }

  /** A Keel tool for one listed MCP tool, or undefined (reported once) when it cannot be one. */
  private toTool(def: {
    name: string;
    description?: string;
    title?: string;
    inputSchema: unknown;
    annotations?: McpToolAnnotations;
  }): Tool | undefined {
    const remote = String(def.name);
    const name = remote.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
    try {
      if (!TOOL_NAME_PATTERN.test(name)) throw new Error("its name has no usable characters");
      const parameters = jsonSchemaParameters(def.inputSchema, "inputSchema");
      const traits = traitsFromAnnotations(def.annotations);
      const text = (def.description ?? def.title ?? "").trim();
      const description =
        text === ""
          ? `Tool ${remote} of the MCP server ${this.name}.`
          : text.length > MAX_DESCRIPTION_CHARS
            ? `${text.slice(0, MAX_DESCRIPTION_CHARS)}…`
            : text;
      return defineTool({
        name,
        description,
        parameters,
        traits,
        execute: (args, ctx) => this.call(remote, name, args, ctx, traits),
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
    try {
      const result = await client.callTool(
        { name: remote, arguments: args as Record<string, unknown> },
        undefined,
        {
          signal: ctx.signal,
          timeout: this.options.callTimeoutMs ?? 600_000,
          resetTimeoutOnProgress: true,
          onprogress: (p) =>
            ctx.onUpdate({
              progress: p.progress,
              ...(p.total !== undefined && { total: p.total }),
              ...(p.message !== undefined && { message: p.message }),
            }),
        },
      );
      return fromMcpResult(result, name);
    } catch (err) {
      if (ctx.signal.aborted) {
        // A read-only tool changed nothing: the call is cancelled. Any other may have acted.
        if (traits.readOnly) throw err;
        return {
          ok: false,
          code: "OUTCOME_UNKNOWN",
          message: `cancelled while running: Keel sent the MCP server "${this.name}" notifications/cancelled, but MCP does not confirm a stop, so whether ${name} already made its change is unknown. Check before calling it again.`,
          retryable: false,
        };
      }
      const code = (err as { code?: unknown }).code;
      // Not a JSON-RPC error from the server: the transport failed (a refused connection, a
      // session the server no longer knows, a closed pipe).
      const transportFailed = !(err instanceof lib.types.McpError);
      if (
        code === lib.types.ErrorCode.ConnectionClosed ||
        transportFailed ||
        this.client !== client
      ) {
        this.lost(client, "its connection closed during a call");
        return traits.idempotent
          ? {
              ok: false,
              code: "EXECUTION_FAILED",
              message: `the MCP server "${this.name}" was lost during the call (${this.lostReason}). ${name} is idempotent, so calling it again is safe; the server is reconnected when the next turn starts.`,
              retryable: true,
            }
          : {
              ok: false,
              code: "OUTCOME_UNKNOWN",
              message: `the MCP server "${this.name}" was lost during the call (${this.lostReason}); whether ${name} ran is unknown. Check its effects before calling it again; the server is reconnected when the next turn starts.`,
              retryable: false,
            };
      }
      if (code === lib.types.ErrorCode.RequestTimeout) {
        return {
          ok: false,
          code: "TIMEOUT",
          message: `the MCP server "${this.name}" did not answer ${name} in time (${errorText(err)}); whether it ran is unknown. Check its effects before retrying.`,
          retryable: false,
        };
      }
      return {
        ok: false,
        code: "EXECUTION_FAILED",
        message: `the MCP server "${this.name}" refused ${name}: ${errorText(err)}`,
        retryable: false,
      };
    }
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

function errorText(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}
