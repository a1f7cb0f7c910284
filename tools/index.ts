export { TOOL_ALIASES } from "./aliases.ts";
export type { Workspace } from "./builtin/index.ts";
export { builtinTools, createSpill, resolveInWorkspace } from "./builtin/index.ts";
export type { Tool } from "./define-tool.ts";
export {
  defineTool,
  isDefinedTool,
  TOOL_NAME_PATTERN,
  ToolDefinitionError,
} from "./define-tool.ts";
export { prepareCall, truncatedCallResult } from "./prepare-call.ts";
export type { Registry, ResolvedTool } from "./registry.ts";
export { createRegistry } from "./registry.ts";
export type { OutputBudgetOptions } from "./tool-output.ts";
export { applyOutputBudget, errorToResult, toToolResult } from "./tool-output.ts";
export { DEFAULT_OUTPUT_BUDGET, resolveTraits } from "./traits.ts";
export type * from "./types.ts";
export { truncateUtf8, utf8Length } from "./utf8.ts";
