import { createRequire } from "node:module";
import type * as McpClient from "@modelcontextprotocol/sdk/client/index.js";
import type * as McpStdio from "@modelcontextprotocol/sdk/client/stdio.js";
import type * as McpHttp from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type * as McpTypes from "@modelcontextprotocol/sdk/types.js";
import { loadPeer } from "../../contracts/optional-peer.ts";
import type { AjvValidatorClass } from "./output-schema.ts";

const require = createRequire(import.meta.url);

/** The parts of the MCP SDK Keel uses. */
export type Sdk = {
  Client: typeof McpClient.Client;
  StdioClientTransport: typeof McpStdio.StdioClientTransport;
  getDefaultEnvironment: typeof McpStdio.getDefaultEnvironment;
  StreamableHTTPClientTransport: typeof McpHttp.StreamableHTTPClientTransport;
  AjvJsonSchemaValidator: AjvValidatorClass;
  types: typeof McpTypes;
};
let sdk: Sdk | undefined;
/**
 * The SDK, loaded on first use: `import "keel"` costs nothing for an agent without MCP. Not
 * cached on failure: installed later in the same process, the next call finds it.
 */
export async function loadSdk(): Promise<Sdk> {
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
    AjvJsonSchemaValidator: part<{ AjvJsonSchemaValidator: AjvValidatorClass }>("validation/ajv")
      .AjvJsonSchemaValidator,
    types: part<Sdk["types"]>("types.js"),
  };
  return sdk;
}
