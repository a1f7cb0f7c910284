// The public API of Keel. Re-exports only.

export { type AcceptanceOptions, followUpText } from "./actors/acceptance.ts";
export type {
  AcceptanceCheck,
  AcceptanceSpec,
  CheckContext,
  CheckOutcome,
  CommandCheck,
  FunctionCheck,
} from "./actors/acceptance-spec.ts";
export {
  type Agent,
  type AgentOptions,
  createAgent,
  DEFAULT_LIMITS,
  type Instructions,
  type SessionOpenOptions,
} from "./actors/agent.ts";
export { workspaceVersion } from "./actors/artifact-version.ts";
export { AGENT_EVENT_TYPES, type InspectSink } from "./actors/events.ts";
export { buildHandoff, type HandoffOptions, handoffMarkdown } from "./actors/handoff.ts";
export { createIds, randomIds, seededIds } from "./actors/ids.ts";
export { PermissionBroker, type PermissionOptions } from "./actors/permissions.ts";
export {
  type PostgresRetryBudget,
  type PostgresRetryBudgetOptions,
  postgresRetryBudget,
} from "./actors/postgres-retry-budget.ts";
export { clearedResultText, READ_RESULT_TOOL } from "./actors/read-result-tool.ts";
export {
  type RetryBudget,
  tokenBucketBudget,
  unlimitedRetryBudget,
} from "./actors/retry-budget.ts";
export type { ContextOptions } from "./actors/session-context.ts";
export {
  defaultLeaseOwner,
  type InboxOptions,
  type PromptResult,
  Session,
  type SessionRole,
} from "./actors/session-runtime.ts";
export type { TurnResult } from "./actors/turn-runner.ts";
export { SESSION_TASK, startWorker, type Worker, type WorkerOptions } from "./actors/worker.ts";
export type * from "./contracts/acceptance.ts";
export {
  type ChatMessage,
  type ChatToolCall,
  type ChatUserContent,
  toChatMessage,
  toChatMessages,
} from "./contracts/chat.ts";
export { type Clock, sleep, systemClock } from "./contracts/clock.ts";
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
  ModelError,
  type ModelErrorKind,
  type ModelEvent,
  type ModelRequest,
  type ModelToolSpec,
} from "./contracts/model.ts";
export { LineDecoder, type LineResult } from "./contracts/ndjson.ts";
export type {
  DecisionSource,
  PermissionAction,
  PermissionDecision,
  PermissionReply,
  PermissionRequest,
  PermissionRule,
} from "./contracts/permission.ts";
export * from "./contracts/protocol.ts";
export { type Refusal, type RefusalCode, refuse } from "./contracts/refusal.ts";
export type * from "./contracts/status.ts";
export {
  estimateTextTokens,
  headTokens,
  messageTokens,
  requestTokens,
  type TextCounter,
} from "./contracts/tokens.ts";
export type * from "./contracts/tool-result.ts";
export { NOT_EXECUTED, notExecuted } from "./contracts/tool-result.ts";
export { startInspector } from "./inspector/server.ts";
export {
  type AcceptanceOutcome,
  acceptanceMachine,
  acceptanceStatus,
} from "./machines/acceptance.machine.ts";
export {
  DEFAULT_LOOP_GUARD,
  type LoopGuardOptions,
} from "./machines/policies/loop-guard.ts";
export { classifyModelError, parseRetryAfter } from "./machines/policies/retry-classify.ts";
export {
  DEFAULT_RETRY_POLICY,
  decideRetry,
  type RetryPolicy,
} from "./machines/policies/retry-policy.ts";
export type { TurnLimits, TurnOutput } from "./machines/turn.machine.ts";
export { type AiSdkModelOptions, aiSdkModel, toV3Prompt } from "./providers/ai-sdk-model.ts";
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
export {
  type BranchRefusalCode,
  type BranchResult,
  exportJsonl,
  fork,
  rollback,
  switchLeaf,
} from "./session/branches.ts";
export {
  type CompactionRefusalCode,
  type CompactionResult,
  compactSession,
} from "./session/compaction.ts";
export { legalCutPoints } from "./session/compaction-cuts.ts";
export {
  ContextBudget,
  type ContextBudgetOptions,
  type ContextSource,
  type ContextUsage,
} from "./session/context-budget.ts";
export type * from "./session/entries.ts";
export { LOG_SCHEMA_VERSION } from "./session/entries.ts";
export { type Ledger, memoryLedger } from "./session/ledger.ts";
export { SessionLog } from "./session/log.ts";
export { memoryStore } from "./session/memory-store.ts";
export { postgresLedger } from "./session/postgres-ledger.ts";
export {
  POSTGRES_SCHEMA_VERSION,
  type PostgresSessionStore,
  type PostgresStoreOptions,
  postgresStore,
} from "./session/postgres-store.ts";
export { sqliteLedger } from "./session/sqlite-ledger.ts";
export {
  type Durability,
  defaultStorePath,
  type SqliteSessionStore,
  type SqliteStoreOptions,
  sqliteStore,
} from "./session/sqlite-store.ts";
export type {
  AppendOptions,
  Lease,
  LeaseInfo,
  LeaseStore,
  PostedInput,
  SessionStore,
  SessionSummary,
} from "./session/store.ts";
export { builtinTools } from "./tools/builtin/index.ts";
export { defineTool, type Tool, ToolDefinitionError } from "./tools/define-tool.ts";
export { prepareCall } from "./tools/prepare-call.ts";
export { createRegistry, type Registry } from "./tools/registry.ts";
export type * from "./tools/types.ts";
