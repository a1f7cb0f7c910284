import { readFileSync } from "node:fs";
import {
  createRegistry,
  createToolSet,
  type McpServer,
  type McpToolSet,
  mcpServersFromConfig,
  mcpTools,
  type Tool,
} from "../index.ts";
import { CliError, EXIT } from "./errors.ts";

/** `--mcp`, `--mcp-url`, `--mcp-header` and `--mcp-config` as commander collects them. */
export interface McpOptions {
  mcp?: string[];
  mcpUrl?: string[];
  mcpHeader?: string[];
  mcpConfig?: string;
}

/**
 * The MCP servers the options name: each `--mcp "<command>"` (split like a shell would, quotes
 * kept together), each `--mcp-url` with every `--mcp-header "Name: value"`, and the servers of
 * `--mcp-config` (the `mcpServers` file shape other clients use). A usage error names what is wrong.
 */
export function mcpServersOf(options: McpOptions): (McpServer & { name?: string })[] {
  const servers: (McpServer & { name?: string })[] = [];
  for (const text of options.mcp ?? []) {
    const [command, ...args] = splitCommand(text);
    if (!command)
      throw new CliError(
        `--mcp needs a command, e.g. --mcp "npx -y @modelcontextprotocol/server-everything"`,
        EXIT.usage,
      );
    servers.push({ command, args });
  }
  const headers: Record<string, string> = {};
  for (const h of options.mcpHeader ?? []) {
    const at = h.indexOf(":");
    if (at <= 0)
      throw new CliError(
        `--mcp-header must be "Name: value", got ${JSON.stringify(h)}`,
        EXIT.usage,
      );
    headers[h.slice(0, at).trim()] = h.slice(at + 1).trim();
  }
  for (const url of options.mcpUrl ?? []) {
    try {
      new URL(url);
    } catch {
      throw new CliError(`--mcp-url is not a URL: ${JSON.stringify(url)}`, EXIT.usage);
    }
    servers.push({ url, headers });
  }
  if (options.mcpConfig) {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(options.mcpConfig, "utf8"));
    } catch (err) {
      throw new CliError(
        `--mcp-config ${options.mcpConfig}: ${(err as Error).message}`,
        EXIT.usage,
      );
    }
    try {
      servers.push(...mcpServersFromConfig(json, options.mcpConfig));
    } catch (err) {
      throw new CliError((err as Error).message, EXIT.usage);
    }
  }
  return servers;
}

/**
 * Connects every server (all or nothing: one that cannot start is a config error naming it) and
 * returns the connected sets and the tools to offer beside `builtins`: a server's tool whose
 * name is taken, or is an alias of a built-in, is offered as `<server>_<name>` (said on `warn`).
 */
export async function connectMcp(
  servers: readonly (McpServer & { name?: string })[],
  builtins: readonly Tool[],
  warn: (message: string) => void,
): Promise<{ sets: McpToolSet[]; tools: Tool[] }> {
  const sets: McpToolSet[] = [];
  try {
    for (const server of servers) {
      sets.push(await mcpTools(server, { name: server.name, onProblem: warn }));
    }
  } catch (err) {
    await Promise.all(sets.map((s) => s.close()));
    throw new CliError((err as Error).message, EXIT.config);
  }
  const base = createRegistry(builtins);
  const set = createToolSet({ base, sources: sets, onWarning: warn });
  const tools = set
    .names()
    .filter((name) => base.get(name) === undefined)
    .map((name) => set.get(name)!);
  return { sets, tools };
}

/** Splits a command line into words: spaces separate, '…' and "…" group, \ escapes. */
export function splitCommand(text: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < text.length) word += text[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\" && i + 1 < text.length) {
      word += text[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new CliError(`--mcp: unclosed ${quote} in ${JSON.stringify(text)}`, EXIT.usage);
  if (inWord) words.push(word);
  return words;
}
