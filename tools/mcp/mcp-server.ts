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

/** Package runners whose server is named after the package they run, not after themselves. */
const RUNNERS = new Set(["npx", "uvx", "bunx", "pnpx", "pipx"]);
/** Options of those runners that take a value (`npx -p pkg cmd`, `uvx --from pkg cmd`). */
const VALUE_OPTIONS = new Set(["-p", "--package", "--from", "--with", "--python", "-c", "--call"]);

/**
 * A server's name from how it is reached: the command's file name, or for a package runner
 * (`npx`, `uvx`, …) the package it runs without scope or version
 * (`npx -y @modelcontextprotocol/server-filesystem@1.2 .` → `server-filesystem`), or the URL's
 * host. Only `a-z A-Z 0-9 _ -` are kept. This is a pure function.
 */
export function serverName(server: McpServer): string {
  const clean = (text: string) => text.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64) || "mcp";
  if ("command" in server) {
    const command = basename(server.command).replace(/\.(cmd|exe)$/i, "");
    if (!RUNNERS.has(command)) return clean(command);
    const args = server.args ?? [];
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (VALUE_OPTIONS.has(arg)) i++;
      else if (!arg.startsWith("-")) return clean(packageName(arg));
    }
    return clean(command);
  }
  try {
    return clean(new URL(server.url).hostname);
  } catch {
    return "mcp";
  }
}

/** `@scope/name@1.2` → `name`; `name==1.0` (uvx) → `name`. */
function packageName(spec: string): string {
  const unscoped = spec.startsWith("@") ? spec.slice(spec.indexOf("/") + 1) : spec;
  return unscoped.split(/[@=<>~![]/)[0] || spec;
}

/**
 * `command a b`, or the URL without its credentials, query string or fragment (API keys travel
 * there), for messages; never the headers or the environment (secrets).
 */
export function describeServer(server: McpServer): string {
  if ("command" in server) return [server.command, ...(server.args ?? [])].join(" ").slice(0, 300);
  try {
    const url = new URL(server.url);
    const hidden = url.search !== "" || url.hash !== "";
    return `${url.protocol}//${url.host}${url.pathname}${hidden ? "?…" : ""}`;
  } catch {
    return "(a URL that does not parse)";
  }
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
