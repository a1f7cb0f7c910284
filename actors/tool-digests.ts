import { createHash } from "node:crypto";
import type { ModelToolSpec } from "../contracts/model.ts";

const cache = new WeakMap<readonly ModelToolSpec[], Record<string, string>>();

/**
 * What the model is offered of each tool, as a short digest by tool name: the first 16 hex
 * digits of the SHA-256 of its description and parameters' JSON Schema. A turn's `turn_start`
 * records them, so a replay (`keel replay`) sees that a tool's description or parameters changed
 * even though the recorded model answers the same. Cached per specs array (a registry shares
 * one until it changes).
 */
export function toolDigests(specs: readonly ModelToolSpec[]): Record<string, string> {
  const cached = cache.get(specs);
  if (cached) return cached;
  const out: Record<string, string> = {};
  for (const { function: f } of specs) {
    const text = JSON.stringify([f.description, f.parameters]);
    out[f.name] = createHash("sha256").update(text).digest("hex").slice(0, 16);
  }
  cache.set(specs, out);
  return out;
}
