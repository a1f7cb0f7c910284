import { basename } from "node:path";

/** An MCP server Keel starts and speaks to over stdio. */
export interface McpStdioServer {
  command: string;
  args?: string[];
  /** Added to a safe default environment (PATH, HOME, …), as MCP clients do. */
  env?: Record<string, string>;
  cwd?: string;
}

/** An MCP server reached over Streamable HTTP; `headers` carry auth (`Authorization: Bearer …`). */
export interface McpHttpServer {
  url: string;
  headers?: Record<string, string>;
}

/** Where an MCP server is: a command (stdio) or a URL (Streamable HTTP). */
export type McpServer = McpStdioServer | McpHttpServer;

/** A server's name from how it is reached: the command's file name, or the URL's host. */
export function serverName(server: McpServer): string {
  if ("command" in server) return basename(server.command).replace(/[^a-zA-Z0-9_-]/g, "_") || "mcp";
  try {
    return new URL(server.url).hostname.replace(/[^a-zA-Z0-9_-]/g, "_") || "mcp";
  } catch {
    return "mcp";
  }
}

/** `command a b` or the URL, for messages (never the headers or the environment: secrets). */
export function describeServer(server: McpServer): string {
  if ("command" in server) return [server.command, ...(server.args ?? [])].join(" ").slice(0, 300);
  return server.url;
}

/**
 * The servers of a config file in the shape other MCP clients use (Claude Desktop, Cursor,
 * Claude Code's `.mcp.json`): `{ "mcpServers": { "<name>": { "command", "args"?, "env"?,
 * "cwd"? } | { "url", "headers"?, "type"?: "http" | "streamable-http" } } }`, each with its
 * name. Throws `TypeError` naming the server and the field that is wrong, and how to fix it.
 * Pure.
 */
export function mcpServersFromConfig(
  config: unknown,
  where = "the MCP config",
): (McpServer & { name: string })[] {
  const servers = (config as { mcpServers?: unknown } | null)?.mcpServers;
  if (typeof servers !== "object" || servers === null || Array.isArray(servers)) {
    throw new TypeError(
      `${where}: expected {"mcpServers": {"<name>": {"command": "…", "args": […]} | {"url": "…"}}}`,
    );
  }
  return Object.entries(servers).map(([name, value]) => {
    const at = `${where}: mcpServers.${name}`;
    if (typeof value !== "object" || value === null) throw new TypeError(`${at} must be an object`);
    const v = value as Record<string, unknown>;
    const strings = (field: string, x: unknown, kind: "array" | "record") => {
      if (x === undefined) return;
      const ok =
        kind === "array"
          ? Array.isArray(x) && x.every((s) => typeof s === "string")
          : typeof x === "object" &&
            x !== null &&
            Object.values(x).every((s) => typeof s === "string");
      if (!ok) {
        throw new TypeError(
          `${at}.${field} must be ${kind === "array" ? "an array of strings" : "an object of strings"}`,
        );
      }
    };
    if (typeof v.command === "string" && v.command !== "") {
      strings("args", v.args, "array");
      strings("env", v.env, "record");
      if (v.cwd !== undefined && typeof v.cwd !== "string")
        throw new TypeError(`${at}.cwd must be a path`);
      return {
        name,
        command: v.command,
        ...(v.args !== undefined && { args: v.args as string[] }),
        ...(v.env !== undefined && { env: v.env as Record<string, string> }),
        ...(v.cwd !== undefined && { cwd: v.cwd as string }),
      };
    }
    if (typeof v.url === "string") {
      if (v.type === "sse") {
        throw new TypeError(
          `${at}: the SSE transport is not supported; use the server's Streamable HTTP endpoint ("type": "http")`,
        );
      }
      try {
        new URL(v.url);
      } catch {
        throw new TypeError(`${at}.url is not a URL: ${JSON.stringify(v.url)}`);
      }
      strings("headers", v.headers, "record");
      return {
        name,
        url: v.url,
        ...(v.headers !== undefined && { headers: v.headers as Record<string, string> }),
      };
    }
    throw new TypeError(
      `${at} needs "command" (a stdio server) or "url" (a Streamable HTTP server)`,
    );
  });
}
