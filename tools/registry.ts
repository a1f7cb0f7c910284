import type { ModelToolSpec } from "../contracts/model.ts";
import { TOOL_ALIASES } from "./aliases.ts";
import { defineTool, type Tool } from "./define-tool.ts";
import { closestName, normalizeName } from "./edit-distance.ts";
import type { ToolDefinition } from "./types.ts";

/** How a requested name reached a registered tool. */
export type ResolvedTool =
  | { ok: true; tool: Tool; via: "exact" | "alias" | "normalized" }
  | { ok: false; closest?: string };

/** The set of tools a session may call; changes at runtime bump `version`. */
export interface Registry {
  /** Increases on every add/remove; callers key caches on it. */
  readonly version: number;
  /** Registers a tool (defining it if needed). Throws if the name is taken. */
  add(tool: ToolDefinition | Tool): Tool;
  /** Unregisters a tool; false if it was not registered. */
  remove(name: string): boolean;
  /** The tool registered under exactly `name`. */
  get(name: string): Tool | undefined;
  /**
   * Exact name, then a known alias (`Read`, `Bash`, `LS`, …) whose target is registered, then a
   * unique match ignoring case, `-` and `_`. Otherwise the closest name, if any.
   */
  resolve(name: string): ResolvedTool;
  /** Registered names in registration order. */
  names(): string[];
  /** The registered name closest to `name` by edit distance, if close and unambiguous. */
  closest(name: string): string | undefined;
  /** The OpenAI `tools[]` array (frozen, shared); cached until the next add/remove. */
  modelTools(): ModelToolSpec[];
}

/** Creates a registry holding `tools`. Throws `ToolDefinitionError` for an invalid tool. */
export function createRegistry(tools: Iterable<ToolDefinition | Tool> = []): Registry {
  const byName = new Map<string, Tool>();
  let byNormalized: Map<string, string | null> | undefined;
  let specs: ModelToolSpec[] | undefined;
  let version = 0;

  const changed = () => {
    version++;
    byNormalized = undefined;
    specs = undefined;
  };

  const normalizedIndex = () => {
    if (byNormalized) return byNormalized;
    byNormalized = new Map();
    for (const name of byName.keys()) {
      const key = normalizeName(name);
      byNormalized.set(key, byNormalized.has(key) ? null : name);
    }
    return byNormalized;
  };

  const registry: Registry = {
    get version() {
      return version;
    },
    add(def) {
      const tool = defineTool(def as ToolDefinition);
      if (byName.has(tool.name)) {
        throw new Error(
          `registry: a tool named "${tool.name}" is already registered; remove it first`,
        );
      }
      byName.set(tool.name, tool);
      changed();
      return tool;
    },
    remove(name) {
      const removed = byName.delete(name);
      if (removed) changed();
      return removed;
    },
    get: (name) => byName.get(name),
    resolve(name) {
      const exact = byName.get(name);
      if (exact) return { ok: true, tool: exact, via: "exact" };
      const key = normalizeName(String(name));
      const target = TOOL_ALIASES[key];
      const aliased = target === undefined ? undefined : byName.get(target);
      if (aliased && Object.hasOwn(TOOL_ALIASES, key))
        return { ok: true, tool: aliased, via: "alias" };
      const normalized = normalizedIndex().get(key);
      if (normalized) return { ok: true, tool: byName.get(normalized)!, via: "normalized" };
      return { ok: false, closest: registry.closest(name) };
    },
    names: () => [...byName.keys()],
    closest: (name) => closestName(String(name), byName.keys()),
    modelTools() {
      specs ??= Object.freeze(
        [...byName.values()].map((tool) => ({
          type: "function" as const,
          function: {
            name: tool.name,
            description: tool.modelDescription,
            parameters: tool.jsonSchema,
          },
        })),
      ) as ModelToolSpec[];
      return specs;
    },
  };
  for (const tool of tools) registry.add(tool);
  return registry;
}
