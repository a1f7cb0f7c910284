// The public API of Keel: re-exports only, each name documented in docs/embedding.md ("API").
// Tests import internals from their modules; the few internals the benchmarks measure from the
// built package (createIds, systemClock, SessionLog, ContextBudget, the token counters) are
// exported and listed in docs/embedding.md as such. The control protocol's vocabulary is
// keel/client's (client/index.ts).

export type {
  AcceptanceCheck,
  AcceptanceOptions,
  AcceptanceSpec,
  CheckContext,
  CheckOutcome,
  CommandCheck,
  FunctionCheck,
} from "./actors/acceptance-spec.ts";
export { createAgent } from "./actors/agent.ts";
export type {
  Agent,
  AgentOptions,
  Instructions,
  SessionOpenOptions,
} from "./actors/agent-options.ts";
export { workspaceVersion } from "./actors/artifact-version.ts";
export { type DeletedSessionData, deleteStoredSession } from "./actors/delete-session.ts";
export {
  type AnswerOptions,
  type AnswerResult,
  answerThroughStore,
} from "./actors/durable-permissions.ts";
export { AGENT_EVENT_TYPES, type InspectSink } from "./actors/events.ts";
export { type HandoffOptions, handoffMarkdown } from "./actors/handoff.ts";
export { createIds } from "./actors/ids.ts";
export type { PermissionOptions } from "./actors/permissions.ts";
export {
  type PostgresAgentSpendOptions,
  postgresAgentSpend,
  type SharedSpend,
} from "./actors/postgres-agent-budget.ts";
export { postgresProviderSlots } from "./actors/postgres-provider-slots.ts";
export { postgresRetryBudget } from "./actors/postgres-retry-budget.ts";
export { processSlots } from "./actors/provider-slots.ts";
export { type RedactResult, redactStoredSession } from "./actors/redact-session.ts";
export {
  type ReplayOptions,
  type ReplayReport,
  replaySession,
} from "./actors/replay-session.ts";
export { type RetryBudget, tokenBucketBudget } from "./actors/retry-budget.ts";
export type { Session } from "./actors/session.ts";
export type { ContextOptions } from "./actors/session-context.ts";
export type { InboxOptions, PromptResult } from "./actors/session-options.ts";
export { openTelemetry } from "./actors/telemetry.ts";
export { startWorker } from "./actors/worker.ts";
export type * from "./contracts/acceptance.ts";
export type { Budget, BudgetStop } from "./contracts/budget.ts";
export {
  type ChatMessage,
  type ChatToolCall,
  type ChatUserContent,
  toChatMessage,
  toChatMessages,
} from "./contracts/chat.ts";
export { type Clock, systemClock } from "./contracts/clock.ts";
export type {
  AgentEvent,
  AgentEventBody,
  AgentEventOf,
  AgentEventType,
} from "./contracts/events.ts";
export type { IdGenerator } from "./contracts/ids.ts";
export { MAX_ARGUMENTS_CHARS, MAX_JSON_DEPTH } from "./contracts/json-limits.ts";
export {
  type AssistantPart,
  type ImagePart,
  type JsonValue,
  type Message,
  type ProviderMetadata,
  type ReasoningPart,
  type TextPart,
  type ToolCallPart,
  type ToolResultPart,
  textOf,
  toolCallsOf,
  type Usage,
  type UserPart,
  userText,
} from "./contracts/messages.ts";
export {
  type FinishReason,
  type Model,
  type ModelCapabilities,
  ModelError,
  type ModelErrorKind,
  type ModelEvent,
  type ModelRequest,
  type ModelToolSpec,
} from "./contracts/model.ts";
export type {
  DecisionSource,
  PermissionAction,
  PermissionDecision,
  PermissionReply,
  PermissionRequest,
  PermissionRule,
  Risk,
} from "./contracts/permission.ts";
export type { Refusal, RefusalCode } from "./contracts/refusal.ts";
export type {
  AttemptStatus,
  CallOutcome,
  InboxLane,
  InboxSource,
  TurnFailureCode,
  TurnStatus,
} from "./contracts/status.ts";
export { estimateTextTokens, requestTokens } from "./contracts/tokens.ts";
export type {
  Continuation,
  ToolErrorCode,
  ToolFailure,
  ToolImage,
  ToolResult,
  ToolSuccess,
} from "./contracts/tool-result.ts";
export type { TurnResult } from "./contracts/turn-result.ts";
export type { HttpErrorCode } from "./http/http-error.ts";
export {
  createHttpHandler,
  type HttpHandler,
  type HttpHandlerOptions,
} from "./http/http-handler.ts";
export { toNodeListener } from "./http/node-listener.ts";
export type { UiChunk } from "./http/ui-chunks.ts";
export type { UiMessage, UiPart } from "./http/ui-history.ts";
export { type Inspector, type InspectorOptions, startInspector } from "./inspector/server.ts";
export type { LoopGuardOptions } from "./machines/policies/loop-guard.ts";
export type { RetryClassifier, RetryPolicy } from "./machines/policies/retry-policy.ts";
export type { TurnLimits } from "./machines/turn.types.ts";
export { type AiSdkModelOptions, aiSdkModel } from "./providers/ai-sdk-model.ts";
export { type OpenAIModelOptions, openaiModel } from "./providers/openai-model.ts";
export {
  knownModelLimits,
  type ModelLimits,
  openaiTokenCounter,
} from "./providers/openai-tokens.ts";
export {
  type Script,
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptStep,
  scriptedModel,
} from "./providers/scripted-model.ts";
export type { BranchRefusalCode, BranchResult } from "./session/branches.ts";
export type { CompactionRefusalCode, CompactionResult } from "./session/compaction.ts";
export { ContextBudget, type ContextUsage } from "./session/context-budget.ts";
export {
  type EntryOf,
  type EntryType,
  type EntryWriter,
  LOG_SCHEMA_VERSION,
  type LogEntry,
} from "./session/entries.ts";
export { SessionLog } from "./session/log.ts";
export { readSession, type StoredSession } from "./session/read-session.ts";
export type { Divergence } from "./session/replay-compare.ts";
export {
  hasLeases,
  type LeaseStore,
  type SessionStore,
  type SessionSummary,
} from "./session/store.ts";
export { type Ledger, type LedgerOptions, memoryLedger } from "./session/stores/ledger.ts";
export { memoryStore } from "./session/stores/memory-store.ts";
export { postgresLedger } from "./session/stores/postgres-ledger.ts";
export { type PostgresSessionStore, postgresStore } from "./session/stores/postgres-store.ts";
export { sqliteLedger } from "./session/stores/sqlite-ledger.ts";
export {
  type Durability,
  defaultStorePath,
  type SqliteSessionStore,
  type SqliteStoreOptions,
  sqliteStore,
} from "./session/stores/sqlite-store.ts";
export { builtinTools } from "./tools/builtin/index.ts";
export { type SandboxOptions, sandboxSupport } from "./tools/builtin/sandbox.ts";
export { defineTool, type Tool, ToolDefinitionError } from "./tools/define-tool.ts";
export {
  type JsonSchemaParametersOptions,
  jsonSchemaParameters,
  jsonSchemaPatternProblem,
} from "./tools/json-schema-parameters.ts";
export type { McpToolAnnotations } from "./tools/mcp/annotations.ts";
export {
  type McpHttpServer,
  type McpServer,
  type McpStdioServer,
  mcpServersFromConfig,
} from "./tools/mcp/mcp-server.ts";
export {
  McpConnectError,
  McpToolSet,
  type McpToolsOptions,
  mcpTools,
} from "./tools/mcp/mcp-tools.ts";
export { createRegistry, type Registry } from "./tools/registry.ts";
export {
  createToolSet,
  isToolSource,
  type ToolSet,
  type ToolSetOptions,
  type ToolSetSnapshot,
  type ToolSource,
} from "./tools/tool-set.ts";
export type {
  OutputBudget,
  ToolContext,
  ToolDefinition,
  ToolExample,
  ToolOutput,
  ToolTraits,
} from "./tools/types.ts";
