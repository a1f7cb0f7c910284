import type { ModelToolSpec } from "../contracts/model.ts";
import { TOOL_ALIASES } from "./aliases.ts";
import { defineTool, TOOL_NAME_PATTERN, type Tool } from "./define-tool.ts";
import { normalizeName } from "./edit-distance.ts";
import { createRegistry, type Registry } from "./registry.ts";
import type { ToolDefinition } from "./types.ts";

/**
 * Tools that come and go at run time (an MCP server's, see `mcpTools`). A tool set reads
 * `tools()` only when it is refreshed, so what a turn offers never changes under it.
 */
export interface ToolSource {
  /** Names the source in messages and prefixes a tool of it whose name is taken. */
  readonly name: string;
  /** Increases whenever `tools()` changes. */
  readonly version: number;
  /** The tools as of the last refresh. */
  tools(): readonly Tool[];
  /**
   * Applies what changed since the last refresh (a pending list change) and reconnects a source
   * that was lost. Contract: never rejects; a problem is reported by the source itself.
   */
  refresh(): Promise<void>;
}

/** True for a {@link ToolSource} (as opposed to a tool definition). */
export function isToolSource(value: unknown): value is ToolSource {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as ToolSource).tools === "function" &&
    typeof (value as ToolSource).refresh === "function"
  );
}

/** What a turn saw: the tool names it was offered and each source's version. */
export interface ToolSetSnapshot {
  version: number;
  tools: string[];
  sources: { name: string; version: number }[];
}

/** A session's tools: a registry whose sources change only at `refresh()`. */
export interface ToolSet extends Registry {
  /**
   * Refreshes every source (pending list changes, reconnection of a lost server) and applies
   * their tools. Called by the session when a turn starts, never while one runs, so a list
   * change lands between turns and never in the middle of a batch. Never rejects.
   */
  refresh(): Promise<void>;
  /** The tools on offer now, for the log's record of the set a turn saw. */
  snapshot(): ToolSetSnapshot;
}

/** What `toolSet` assembles: the agent's registry and sources, narrowed, plus the session's own tools. */
export interface ToolSetOptions {
  /** The agent's registry; its own changes show at once, as they do for every session. */
  base: Registry;
  /** The agent's sources (its MCP servers): like `base`, narrowed by `only` and `exclude`. */
  sources?: readonly ToolSource[];
  /** The session's own tools and sources: always offered, a name here wins over the agent's. */
  add?: readonly (ToolDefinition | Tool | ToolSource)[];
  /** Keep only these of the agent's tools (and its sources' tools). */
  only?: readonly string[];
  /** Drop these of the agent's tools. */
  exclude?: readonly string[];
  /** Kept whatever `only` and `exclude` say (the `read_result` built-in). */
  keep?: readonly string[];
  /** Told once per source tool renamed or left out because its name is taken. Must not throw. */
  onWarning?: (message: string) => void;
}

/**
 * A session's tool set: the agent's registry and sources, narrowed by `only` / `exclude`, plus
 * the session's own tools and sources. A source's tool whose name is taken (by a tool already in
 * the set, or by a name that is an alias of a built-in, like `Bash`) is offered as
 * `<source>_<name>` instead, and the warning says so: a server cannot capture calls meant for
 * another tool. Sources' tools change only at {@link ToolSet.refresh}. Throws `TypeError` for
 * bad options, naming which.
 */
export function createToolSet(options: ToolSetOptions): ToolSet {
  const { base, onWarning = () => {} } = options;
  for (const key of ["only", "exclude", "keep"] as const) {
    const v = options[key];
    if (v !== undefined && (!Array.isArray(v) || v.some((n) => typeof n !== "string"))) {
      throw new TypeError(`tools.${key} must be an array of tool names, got ${String(v)}`);
    }
  }
  const only = options.only && new Set(options.only);
  const exclude = new Set(options.exclude ?? []);
  const keep = new Set(options.keep ?? []);
  const inherited = [...(options.sources ?? [])];
  const ownSources: ToolSource[] = [];
  const ownDefs: (ToolDefinition | Tool)[] = [];
  for (const item of options.add ?? []) {
    if (isToolSource(item)) ownSources.push(item);
    else ownDefs.push(item);
  }
  const own = createRegistry(ownDefs);
  const applied = new Map<ToolSource, { version: number; tools: readonly Tool[] }>();
  const apply = () => {
    for (const s of [...inherited, ...ownSources])
      applied.set(s, { version: s.version, tools: s.tools() });
    appliedVersion++;
  };
  let appliedVersion = 0;
  apply();
  const warned = new Set<string>();
  const warnOnce = (key: string, message: string) => {
    if (warned.has(key)) return;
    warned.add(key);
    onWarning(message);
  };
  const renamed = new WeakMap<Tool, Map<string, Tool>>();
  const renamedTool = (tool: Tool, name: string): Tool => {
    const byName = renamed.get(tool) ?? new Map<string, Tool>();
    renamed.set(tool, byName);
    const copy = byName.get(name) ?? defineTool({ ...tool, name });
    byName.set(name, copy);
    return copy;
  };
  const allowed = (name: string) =>
    keep.has(name) || ((!only || only.has(name)) && !exclude.has(name));

  let viewKey = "";
  let view: Registry = createRegistry();
  let version = 0;
  const current = (): Registry => {
    const key = `${base.version}/${own.version}/${appliedVersion}`;
    if (key === viewKey) return view;
    const tools = new Map<string, Tool>();
    const normalized = new Set<string>();
    const put = (tool: Tool) => {
      tools.set(tool.name, tool);
      normalized.add(normalizeName(tool.name));
    };
    for (const name of own.names()) put(own.get(name)!);
    for (const name of base.names()) if (allowed(name) && !tools.has(name)) put(base.get(name)!);
    const fromSources = (source: ToolSource, filtered: boolean) => {
      for (const tool of applied.get(source)?.tools ?? []) {
        if (filtered && !allowed(tool.name)) continue;
        const key = normalizeName(tool.name);
        if (!tools.has(tool.name) && !normalized.has(key) && !Object.hasOwn(TOOL_ALIASES, key)) {
          put(tool);
          continue;
        }
        const alt = `${source.name}_${tool.name}`.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
        if (TOOL_NAME_PATTERN.test(alt) && !tools.has(alt) && !normalized.has(normalizeName(alt))) {
          put(renamedTool(tool, alt));
          warnOnce(
            `${source.name}/${tool.name}/${alt}`,
            `tool "${tool.name}" of "${source.name}" is offered as "${alt}": its name is taken (or is an alias of a built-in tool)`,
          );
        } else {
          warnOnce(
            `${source.name}/${tool.name}`,
            `tool "${tool.name}" of "${source.name}" is left out: its name and "${alt}" are taken`,
          );
        }
      }
    };
    for (const s of ownSources) fromSources(s, false);
    for (const s of inherited) fromSources(s, true);
    view = createRegistry(tools.values());
    viewKey = key;
    version++;
    return view;
  };

  let refreshing: Promise<void> | undefined;
  const set: ToolSet = {
    get version() {
      current();
      return version;
    },
    add: (def) => own.add(def),
    remove: (name) => own.remove(name),
    get: (name) => current().get(name),
    resolve: (name) => current().resolve(name),
    names: () => current().names(),
    closest: (name) => current().closest(name),
    modelTools: (): ModelToolSpec[] => current().modelTools(),
    refresh() {
      refreshing ??= Promise.all(
        [...inherited, ...ownSources].map((s) => s.refresh().catch(() => {})),
      )
        .then(() => {
          const changed = [...applied].some(([s, a]) => s.version !== a.version);
          if (changed) apply();
        })
        .finally(() => {
          refreshing = undefined;
        });
      return refreshing;
    },
    snapshot: () => ({
      version: set.version,
      tools: current().names(),
      sources: [...applied].map(([s, a]) => ({ name: s.name, version: a.version })),
    }),
  };
  return set;
}
