// keel/client: drive a Keel server (`keel serve --stdio`) from another process. Re-exports only.
export type * from "../contracts/events.ts";
export type * from "../contracts/permission.ts";
export type * from "../contracts/protocol.ts";
export { PROTOCOL_VERSION } from "../contracts/protocol.ts";
export type { ToolResult } from "../contracts/tool-result.ts";
export {
  ClientSession,
  type ClientTool,
  type ClientToolContext,
  type ConnectOptions,
  connect,
  KeelClient,
  type OpenSessionOptions,
  type PermissionHandler,
} from "./connect.ts";
export { KeelConnectionError, KeelRequestError } from "./errors.ts";
