import type { ToolTraits } from "../types.ts";

/** The behaviour hints an MCP server may declare on a tool (`Tool.annotations`). */
export interface McpToolAnnotations {
  readOnlyHint?: unknown;
  destructiveHint?: unknown;
  idempotentHint?: unknown;
  openWorldHint?: unknown;
}

/**
 * Keel traits from an MCP tool's annotations, read conservatively: a hint counts only when it
 * is the literal boolean, and an absent one reads as risky (MCP's own defaults: not read-only,
 * destructive, not idempotent, open world).
 * - `readOnlyHint: true` → read-only and concurrency-safe, and idempotent (it changes nothing,
 *   so calling it again is safe); risk `low` only when also `openWorldHint: false` (a tool that
 *   reaches the outside world can carry data out), else `medium`.
 * - otherwise risk `high` (destructive or open-world: refused by an agent without a `permissions`
 *   option), or `medium` when both `destructiveHint: false` (it only adds) and
 *   `openWorldHint: false` (it reaches nothing outside the server);
 *   idempotent only with `idempotentHint: true`; never concurrency-safe.
 * - always cancellable: a cancel sends `notifications/cancelled` (the server may still have
 *   acted; see `mcpToolSet`). Pure.
 */
export function traitsFromAnnotations(annotations: McpToolAnnotations | undefined): ToolTraits {
  const a = typeof annotations === "object" && annotations !== null ? annotations : {};
  const readOnly = a.readOnlyHint === true;
  if (readOnly) {
    return {
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      cancellable: true,
      risk: a.openWorldHint === false ? "low" : "medium",
    };
  }
  return {
    readOnly: false,
    concurrencySafe: false,
    idempotent: a.idempotentHint === true,
    cancellable: true,
    risk: a.destructiveHint === false && a.openWorldHint === false ? "medium" : "high",
  };
}
