import pino, { type Logger } from "pino";
import { type Clock, checkDuration, MAX_TIMER_MS, systemClock } from "../contracts/clock.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import type { Model } from "../contracts/model.ts";
import type { acceptanceMachine } from "../machines/acceptance.machine.ts";
import type { DrainMode, DrainPolicy } from "../machines/policies/inbox.ts";
import { type LoopGuardOptions, resolveLoopGuard } from "../machines/policies/loop-guard.ts";
import { type RetryPolicy, resolveRetryPolicy } from "../machines/policies/retry-policy.ts";
import type { TurnLimits } from "../machines/turn.machine.ts";
import { READ_RESULT_TOOL } from "../session/clear-results.ts";
import type { HandoffRecord } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import { memoryStore } from "../session/memory-store.ts";
import { hasLeases, type SessionStore, type SessionSummary } from "../session/store.ts";
import { withDefaultBudget } from "../tools/define-tool.ts";
import { createRegistry, type Registry } from "../tools/registry.ts";
import { createToolSet, isToolSource, type ToolSource } from "../tools/tool-set.ts";
import { windowOutputBudget } from "../tools/traits.ts";
import type { ToolDefinition } from "../tools/types.ts";
import { AcceptanceHost, type AcceptanceOptions, checkAcceptanceOptions } from "./acceptance.ts";
import type { InspectSink } from "./events.ts";
import { createIds } from "./ids.ts";
import { PermissionBroker, type PermissionOptions } from "./permissions.ts";
import { type ProviderSlots, processSlots } from "./provider-slots.ts";
import { readResultTool } from "./read-result-tool.ts";
import { recoverCalls } from "./recover-calls.ts";
import type { RetryBudget } from "./retry-budget.ts";
import { Session } from "./session.ts";
import { type ContextOptions, checkContextOptions, SessionContext } from "./session-context.ts";
import { defaultLeaseOwner } from "./session-lease.ts";
import type { SessionRole } from "./session-options.ts";
import { createSpill, sessionSpillDir } from "./spill-output.ts";
import type { Telemetry } from "./telemetry.ts";
import type { TurnDeps } from "./turn-scope.ts";

const isInstructions = (v: unknown) => typeof v === "string" || typeof v === "function";

/** What `createAgent` takes: the model, the tools, the store, and every budget and seam. */
export interface AgentOptions {
  /** The model every session talks to (`openaiModel`, `scriptedModel`, or your own `Model`). */
  model: Model;
  /**
   * Tools the model may call, and tool sources (an MCP server's tools: `await mcpTools(…)`), or
   * a registry to share and change at runtime.
   */
  tools?: readonly (ToolDefinition | ToolSource)[] | Registry;
  /** Where session logs live. Default: in memory (lost on exit). */
  store?: SessionStore;
  /**
   * What the model is told in every request, before the tools and the history (the stable
   * prefix), or a function of the session that returns it. Recorded in the session's log as a
   * `settings` entry when a session first runs with instructions different from those in force
   * there, so a rollback or fork restores the instructions in force at that point;
   * `session.setInstructions()` changes them mid-session.
   */
  instructions?: Instructions;
  /** The context budget, automatic compaction and overflow recovery (docs/long-sessions.md). */
  context?: ContextOptions;
  /**
   * The folder for the files sessions write beside their log: a tool output over an
   * `outputBudget` with `overflow: "spill"` goes to
   * `<dataDir>/sessions/<sessionId>/spill/<callId>-<hash>.txt`, and its result carries the path
   * and SHA-256. Default `.keel` (next to the default SQLite file, resolved against the working
   * directory when written). Paths are reported as given, so with a relative `dataDir` a
   * `read_file` rooted at the working directory (e.g. `builtinTools({ root: "." })`) can page
   * through them. Nothing is written unless a tool spills.
   */
  dataDir?: string;
  limits?: Partial<TurnLimits> & {
    /** @deprecated Renamed `maxSpendTokens` (a spend cap, not a window); removed in the next release. */
    maxTokens?: number;
  };
  /** Default 8. */
  maxParallelToolCalls?: number;
  /** How long a cancelled tool may keep running before its outcome is unknown. Default 5 000 ms. */
  stopDeadlineMs?: number;
  /** Bound on the end-of-turn finalizer (persist, settle). Default 10 000 ms. */
  finalizeDeadlineMs?: number;
  retry?: Partial<RetryPolicy>;
  /**
   * The loop guard: the same call (tool and normalised arguments) failing the same way
   * `repeats` times in a row gets a result telling the model to change approach; at `failAfter`
   * in a row the turn ends `failed` with reason `loop_detected`. Default `{ repeats: 3,
   * failAfter: 2 × repeats }`; `false` turns it off.
   */
  loopGuard?: Partial<LoopGuardOptions> | false;
  /** Shared across sessions of one provider: bounds extra attempts when many fail at once. */
  retryBudget?: RetryBudget;
  /**
   * Bounds the model requests in flight per provider key, across this agent's sessions
   * (docs/providers.md, "Concurrency"): `{ openai: 8 }`. The key is `model.provider`, else
   * the part of the model's name before its first `:` and `.` (`openai:gpt-4o` → `openai`).
   * A request over the bound waits its turn (FIFO; `attempt.queued`), and the wait counts
   * against the turn's deadline. Or slots shared by several agents or processes:
   * `processSlots({...})`, `postgresProviderSlots(pool, {...})` (docs/many-processes.md).
   * Absent: unbounded.
   */
  concurrency?: Readonly<Record<string, number>> | ProviderSlots;
  /** How steering and follow-ups are read. Default: steer "all", followUp "one-at-a-time". */
  drain?: { steer?: DrainMode; followUp?: DrainMode };
  /** Inputs that make a session deterministic in tests (see `keel/testing`). */
  clock?: Clock;
  ids?: IdGenerator;
  /** Jitter of retry delays (uniform in [0, 1)); default `Math.random`. */
  random?: () => number;
  /** A pino logger; default: quiet unless `KEEL_LOG` names a level. */
  logger?: Logger;
  /** The inspector (or any sink): sees every actor's events and every session event. */
  inspect?: InspectSink;
  /**
   * OpenTelemetry traces (`await openTelemetry()`): spans for turns, model requests, tool calls
   * and compactions, from the session events. Absent: `@opentelemetry/api` is never loaded.
   */
  telemetry?: Telemetry;
  /**
   * Permission rules and the embedder's approver. Absent: every call is allowed. Present:
   * rules first, then defaults by risk (high asks); a decline ends the turn, a decline with
   * feedback becomes the call's result (docs/permissions.md).
   */
  permissions?: PermissionOptions;
  /**
   * Sharing the store with other processes (SQLite file, PostgreSQL): a session runs only in the
   * process holding its lease (docs/stores.md, docs/many-processes.md). On by default when the store has leases; a
   * process that opens a session another live runner owns follows it: it reads, its inputs go
   * to the owner, and it takes the session over (with crash recovery) only when the owner's
   * lease ends. `false`: no leases (one process per store).
   */
  lease?:
    | false
    | {
        /** This process's name in lease rows. Default `host:pid`. */
        owner?: string;
        /** Lease duration; renewed every third of it. Default 10 000 ms. */
        ttlMs?: number;
        /** How often followers try to take over and owners re-read posted inputs. Default 1 000 ms. */
        pollMs?: number;
        /** Called when a session's role changes. */
        onRole?: (sessionId: string, role: SessionRole) => void;
      };
  /** @internal Test seam: builds each session's permission broker (mutation tests only). */
  permissionBroker?: (options: PermissionOptions) => PermissionBroker;
  /** @internal Test seam: a variant of the inbox drain policy (mutation tests only). */
  lanesToDrain?: DrainPolicy;
  /** @internal Test seam: a variant of the turn statechart (mutation tests only). */
  turnMachine?: TurnDeps["turnMachine"];
  /**
   * Done means accepted (docs/acceptance.md): executable checks the embedder defines, run against the
   * artifact (by default the files of `workspace`, versioned by their git tree), with evidence
   * bound to that version. Checks run after each turn (`runAfterTurn`), on `session.accept()`,
   * and, with `until: "passed"`, in a loop that sends failing evidence back as follow-ups.
   */
  acceptance?: AcceptanceOptions;
  /** @internal Test seam: a variant of the acceptance statechart (mutation tests only). */
  acceptanceMachine?: typeof acceptanceMachine;
}

/** Instructions: a text, or a function of the session returning it. */
export type Instructions = string | ((session: Session) => string);

/** `agent.session(id, options)` / `agent.openSession(id, options)`. */
export interface SessionOpenOptions {
  /** Instructions for this session, in place of the agent's. */
  instructions?: Instructions;
  /**
   * Start from a handoff (`session.handoff()` of an earlier session): before any new work the
   * checks it verified are run again and the model is told what no longer holds.
   */
  handoff?: HandoffRecord;
  /**
   * This session's tools, beside the agent's: a list adds tools and tool sources (MCP servers);
   * `only` / `exclude` narrow the agent's tools (its `read_result` built-in stays). The session's
   * sources are refreshed between turns (`ToolSet.refresh`).
   */
  tools?: readonly (ToolDefinition | ToolSource)[] | SessionTools;
}

/** A session's tools: `add` to the agent's, keep `only` some of the agent's, or `exclude` some. */
export interface SessionTools {
  add?: readonly (ToolDefinition | ToolSource)[];
  only?: readonly string[];
  exclude?: readonly string[];
}

/** Sessions over one model, tool set and store. Made by `createAgent`. */
export interface Agent {
  /**
   * Opens (or creates) a session and resolves once its log is loaded and crash recovery ran:
   * the way to get a session whose `messages()` and `entries()` can be read. The same id gives
   * the same session until it is closed; after `close()` it opens afresh from the store.
   * `options` apply when the session object is created (a session already open is returned as
   * it is).
   */
  openSession(id?: string, options?: SessionOpenOptions): Promise<Session>;
  /**
   * The session object at once, still opening: inputs wait for it, but reading its log before
   * `await session.ready` throws. Prefer {@link Agent.openSession}.
   */
  session(id?: string, options?: SessionOpenOptions): Session;
  /** The sessions in the store, with their entry counts and times. */
  listSessions(): Promise<SessionSummary[]>;
  /** The tools, shared by every session of this agent; change it to change what they offer. */
  readonly registry: Registry;
  /** Where the sessions' logs are kept. */
  readonly store: SessionStore;
  /** Closes one session (settles its turn, flushes, releases its lease) and forgets it. */
  closeSession(id: string): Promise<void>;
  /** Interrupts running turns, waits for them to settle and flushes every log. */
  close(): Promise<void>;
}

export const DEFAULT_LIMITS: TurnLimits = { maxSteps: 50, maxSpendTokens: 0, deadlineMs: 0 };

/**
 * `limits` with the deprecated `maxTokens` read as `maxSpendTokens` (with a warning, once), and
 * `deadlineMs` checked: at most 2^31 − 1 ms, `Infinity` (or 0) for none.
 */
function resolveLimits(limits: AgentOptions["limits"], logger: Logger): TurnLimits {
  const { maxTokens, ...rest } = limits ?? {};
  const resolved: TurnLimits = { ...DEFAULT_LIMITS, ...rest };
  if (rest.deadlineMs !== undefined) {
    const ms = checkDuration("createAgent: `limits.deadlineMs`", rest.deadlineMs);
    resolved.deadlineMs = ms === Number.POSITIVE_INFINITY ? 0 : ms;
  }
  if (maxTokens !== undefined) {
    const message =
      "createAgent: `limits.maxTokens` is deprecated (it is a spend cap, not a context window): use `limits.maxSpendTokens`; the old name is removed in the next release";
    logger.warn(message);
    process.emitWarning(message, { type: "DeprecationWarning", code: "KEEL_MAX_TOKENS" });
    if (rest.maxSpendTokens === undefined) resolved.maxSpendTokens = maxTokens;
  }
  return resolved;
}

/** `concurrency` as slots: a map makes this agent's own; slots given are shared as they are. */
function resolveSlots(concurrency: AgentOptions["concurrency"]): ProviderSlots | undefined {
  if (concurrency === undefined) return undefined;
  if (
    concurrency !== null &&
    typeof concurrency === "object" &&
    typeof (concurrency as ProviderSlots).acquire === "function"
  )
    return concurrency as ProviderSlots;
  try {
    return processSlots(concurrency as Record<string, number>);
  } catch (err) {
    throw new TypeError(
      (err as Error).message.replace("processSlots", "createAgent: `concurrency`"),
    );
  }
}

function defaultLogger(): Logger {
  const level = process.env.KEEL_LOG || "silent";
  return pino({ level, base: undefined }, pino.destination(2));
}

/**
 * The registry a session's turns read: the agent's own when neither the agent nor the session
 * has tool sources or session tools (nothing to refresh), else a per-session `ToolSet`.
 */
function sessionTools(
  registry: Registry,
  sources: readonly ToolSource[],
  tools: SessionOpenOptions["tools"],
  logger: Logger,
): Registry {
  if (sources.length === 0 && tools === undefined) return registry;
  const own: SessionTools = Array.isArray(tools) ? { add: tools } : ((tools as SessionTools) ?? {});
  return createToolSet({
    base: registry,
    sources,
    add: own.add,
    only: own.only,
    exclude: own.exclude,
    keep: [READ_RESULT_TOOL],
    onWarning: (message) => logger.warn(message),
  });
}

/**
 * Creates an agent: the model, the tools and the store shared by its sessions.
 * Bad options throw a `TypeError` saying which option and what is expected.
 */
export function createAgent(options: AgentOptions): Agent {
  if (!options || typeof options.model?.stream !== "function") {
    throw new TypeError(
      "createAgent: `model` must be a Model with a stream() method, e.g. scriptedModel([...]) or openaiModel({ model: 'gpt-4o-mini' })",
    );
  }
  const positive = (name: string, value: number | undefined) => {
    if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
      throw new TypeError(
        `createAgent: \`${name}\` must be a positive number, got ${String(value)}`,
      );
    }
  };
  positive("maxParallelToolCalls", options.maxParallelToolCalls);
  // Timers: at most 2^31 − 1 ms; Infinity waits the longest a timer can (about 24.8 days).
  const timer = (name: string, value: number | undefined) =>
    value === undefined
      ? undefined
      : Math.min(checkDuration(`createAgent: \`${name}\``, value, 1), MAX_TIMER_MS);
  const stopDeadlineMs = timer("stopDeadlineMs", options.stopDeadlineMs);
  const finalizeDeadlineMs = timer("finalizeDeadlineMs", options.finalizeDeadlineMs);
  timer("lease.ttlMs", options.lease ? options.lease.ttlMs : undefined);
  timer("lease.pollMs", options.lease ? options.lease.pollMs : undefined);
  positive("limits.maxSteps", options.limits?.maxSteps);
  if (
    options.dataDir !== undefined &&
    (typeof options.dataDir !== "string" || options.dataDir.length === 0)
  ) {
    throw new TypeError(
      `createAgent: \`dataDir\` must be a non-empty path, got ${JSON.stringify(options.dataDir)}`,
    );
  }
  // A tool that declares no output budget gets one sized from the model's window.
  const budget = windowOutputBudget(options.model.contextWindow, options.model.maxOutputTokens);
  const given = options.tools && "resolve" in options.tools ? undefined : (options.tools ?? []);
  const sources = (given ?? []).filter(isToolSource);
  const registry = given
    ? createRegistry(
        ((given as readonly unknown[]).filter((t) => !isToolSource(t)) as ToolDefinition[]).map(
          (t) => (budget ? withDefaultBudget(t, budget) : t),
        ),
      )
    : (options.tools as Registry);
  const store = options.store ?? memoryStore();
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? createIds();
  const random = options.random ?? Math.random;
  const logger = options.logger ?? defaultLogger();
  const limits = resolveLimits(options.limits, logger);
  checkContextOptions(options.context);
  checkAcceptanceOptions(options.acceptance);
  const contextOptions = options.context ?? {};
  if (options.instructions !== undefined && !isInstructions(options.instructions)) {
    throw new TypeError(
      `createAgent: \`instructions\` must be a string or a function (session) => string, got ${typeof options.instructions}`,
    );
  }
  const sessions = new Map<string, Session>();
  if (contextOptions.readResultTool)
    registry.add(readResultTool((id) => sessions.get(id)?.sessionLog));
  // Checked here, once: a bad policy is a RangeError from createAgent, not a failed turn later.
  const retry = resolveRetryPolicy(options.retry ?? {});
  const slots = resolveSlots(options.concurrency);
  const loopGuard = resolveLoopGuard(options.loopGuard);
  const inspect = options.inspect;
  const traces = options.telemetry?.forAgent(options.model);
  // Every session event goes to the inspector's sink and to telemetry, when either is on.
  const publish =
    inspect && traces
      ? (e: AgentEvent) => {
          inspect.publish(e);
          traces.publish(e);
        }
      : inspect
        ? (e: AgentEvent) => inspect.publish(e)
        : traces
          ? (e: AgentEvent) => traces.publish(e)
          : undefined;
  const shared = options.lease !== false && hasLeases(store) ? store : undefined;
  const leaseOptions = options.lease || {};
  // One doorbell subscription per agent, dispatched to the sessions by id.
  const rings = new Map<string, Set<() => void>>();
  let unwatch: Promise<() => Promise<void>> | undefined;
  const onDoorbell = (sessionId: string, ring: () => void) => {
    if (shared && !unwatch) {
      unwatch = shared.watchInputs((id) => {
        for (const r of rings.get(id) ?? []) r();
      });
      unwatch.catch((err) =>
        logger.warn({ err }, "the store's doorbell could not start; polling only"),
      );
    }
    const set = rings.get(sessionId) ?? new Set<() => void>();
    rings.set(sessionId, set);
    set.add(ring);
    return () => {
      set.delete(ring);
      if (set.size === 0) rings.delete(sessionId);
    };
  };
  const dataDir = options.dataDir ?? ".keel";

  const agent: Agent = {
    registry,
    store,
    session(id, sessionOptions = {}) {
      const sessionId = id ?? ids("s");
      const existing = sessions.get(sessionId);
      if (existing && !existing.closed) return existing;
      // A session still closing flushes first: one writer per session.
      const previous = existing?.close();
      const instructions = sessionOptions.instructions ?? options.instructions;
      if (instructions !== undefined && !isInstructions(instructions)) {
        throw new TypeError(
          `agent.session: \`instructions\` must be a string or a function (session) => string, got ${typeof instructions}`,
        );
      }
      const sessionLogger = logger.child({ sessionId });
      const tools = sessionTools(registry, sources, sessionOptions.tools, sessionLogger);
      const session: Session = new Session({
        sessionId,
        logger: sessionLogger,
        now: () => clock.now(),
        ids,
        instructions,
        model: options.model,
        readResultTool: contextOptions.readResultTool === true,
        drain: {
          steer: options.drain?.steer ?? "all",
          followUp: options.drain?.followUp ?? "one-at-a-time",
        },
        lanesToDrain: options.lanesToDrain,
        openLog: async () => {
          await previous?.catch(() => {});
          return SessionLog.open({ sessionId, store, clock, ids });
        },
        onClosed: () => {
          if (sessions.get(sessionId) === session) sessions.delete(sessionId);
        },
        recover: (log) =>
          recoverCalls({
            log,
            registry: tools,
            logger: sessionLogger,
            ...(traces ? { onSettled: (entry) => traces.recovered(sessionId, entry) } : {}),
          }),
        lease: shared
          ? {
              store: shared,
              owner: leaseOptions.owner ?? defaultLeaseOwner(),
              ttlMs: leaseOptions.ttlMs ?? 10_000,
              pollMs: leaseOptions.pollMs ?? 1000,
              onDoorbell,
              onRole: leaseOptions.onRole && ((role) => leaseOptions.onRole!(sessionId, role)),
            }
          : undefined,
        handoff: sessionOptions.handoff,
        acceptance: options.acceptance
          ? (log, emit, followUp) =>
              new AcceptanceHost({
                // A copy: setAcceptanceSpec changes one session's spec, not the agent's.
                options: { ...options.acceptance! },
                log,
                clock,
                logger: sessionLogger,
                emit,
                inspect: inspect ? (ev) => inspect.observe(ev) : undefined,
                followUp,
                machine: options.acceptanceMachine,
              })
          : undefined,
        inspect: inspect ? (ev) => inspect.observe(ev) : undefined,
        publish,
        deps: (log, emit, poll) => ({
          sessionId,
          log,
          model: options.model,
          registry: tools,
          clock,
          ids,
          logger: sessionLogger,
          emit,
          retry,
          retryBudget: options.retryBudget,
          slots,
          random,
          limits,
          context: new SessionContext({
            log,
            model: options.model,
            registry: tools,
            ids,
            emit,
            options: contextOptions,
            clock,
          }),
          // Each recovery keeps less, then clips (actors/session-context.ts): room for all three.
          maxOverflowRecoveries: contextOptions.overflowRecoveries ?? 3,
          maxParallelToolCalls: options.maxParallelToolCalls ?? 8,
          stopDeadlineMs: stopDeadlineMs ?? 5000,
          finalizeDeadlineMs: finalizeDeadlineMs ?? 10_000,
          inspect: inspect ? (ev) => inspect.observe(ev) : undefined,
          poll,
          spill: createSpill(sessionSpillDir(dataDir, sessionId)),
          turnMachine: options.turnMachine,
          loopGuard,
          permissions: options.permissions
            ? (options.permissionBroker?.(options.permissions) ??
              new PermissionBroker(options.permissions))
            : undefined,
        }),
      });
      sessions.set(sessionId, session);
      return session;
    },
    async openSession(id, sessionOptions) {
      const session = agent.session(id, sessionOptions);
      await session.ready;
      return session;
    },
    listSessions: () => store.list(),
    async closeSession(id) {
      const session = sessions.get(id);
      sessions.delete(id);
      await session?.close();
    },
    async close() {
      await Promise.all([...sessions.values()].map((s) => s.close()));
      sessions.clear();
      if (unwatch) await (await unwatch.catch(() => async () => {}))();
    },
  };
  return agent;
}
