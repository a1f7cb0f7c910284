// The public API of Keel. Re-exports only.
export {
  type Agent,
  type AgentOptions,
  createAgent,
  DEFAULT_LIMITS,
  type Instructions,
  type SessionOpenOptions,
} from "./actors/agent.ts";
export { AGENT_EVENT_TYPES, type InspectSink } from "./actors/events.ts";
export { createIds, randomIds, seededIds } from "./actors/ids.ts";
export { PermissionBroker, type PermissionOptions } from "./actors/permissions.ts";
export { clearedResultText, READ_RESULT_TOOL } from "./actors/read-result-tool.ts";
export {
  type RetryBudget,
  tokenBucketBudget,
  unlimitedRetryBudget,
} from "./actors/retry-budget.ts";
export type { ContextOptions } from "./actors/session-context.ts";
export { type InboxOptions, type PromptResult, Session } from "./actors/session-runtime.ts";
export type { TurnResult } from "./actors/turn-runner.ts";
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
  type ChatMessage,
  type ChatToolCall,
  type FinishReason,
  type Model,
  ModelError,
  type ModelErrorKind,
  type ModelEvent,
  type ModelRequest,
  type ModelToolSpec,
  type Usage,
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
export { type Ledger, memoryLedger } from "./session/ledger.ts";
export { SessionLog } from "./session/log.ts";
export { memoryStore } from "./session/memory-store.ts";
export { sqliteLedger } from "./session/sqlite-ledger.ts";
export {
  type Durability,
  defaultStorePath,
  type SqliteSessionStore,
  type SqliteStoreOptions,
  sqliteStore,
} from "./session/sqlite-store.ts";
export type { SessionStore, SessionSummary } from "./session/store.ts";
export { builtinTools } from "./tools/builtin/index.ts";
export { defineTool, type Tool, ToolDefinitionError } from "./tools/define-tool.ts";
export { prepareCall } from "./tools/prepare-call.ts";
export { createRegistry, type Registry } from "./tools/registry.ts";
export type * from "./tools/types.ts";
