import pino, { type Logger } from "pino";
import { checkDuration, MAX_TIMER_MS, systemClock } from "../contracts/clock.ts";
import { resolveLoopGuard } from "../machines/policies/loop-guard.ts";
import { resolveRetryPolicy } from "../machines/policies/retry-policy.ts";
import { reopensSync } from "../session/checkpoint.ts";
import { READ_RESULT_TOOL } from "../session/clear-results.ts";
import { SessionLog } from "../session/log.ts";
import { hasLeases } from "../session/store.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { withDefaultBudget } from "../tools/define-tool.ts";
import { createRegistry, type Registry } from "../tools/registry.ts";
import { createToolSet, isToolSource, type ToolSource } from "../tools/tool-set.ts";
import { windowOutputBudget } from "../tools/traits.ts";
import type { ToolDefinition } from "../tools/types.ts";
import { AcceptanceHost } from "./acceptance.ts";
import { checkAcceptanceOptions } from "./acceptance-spec.ts";
import type { Agent, AgentOptions, SessionOpenOptions, SessionTools } from "./agent-options.ts";
import { agentBudgetOptions, resolveLimits, sessionBudgetOptions } from "./budget-options.ts";
import { deleteStoredSession } from "./delete-session.ts";
import { Dormancy } from "./dormancy.ts";
import { createIds } from "./ids.ts";
import { PermissionBroker } from "./permissions.ts";
import { type ProviderSlots, processSlots } from "./provider-slots.ts";
import { readResultTool } from "./read-result-tool.ts";
import { recoverCalls, resolveRecovery } from "./recover-calls.ts";
import { safeSinks } from "./safe-sinks.ts";
import { Session } from "./session.ts";
import { SessionBudgets } from "./session-budgets.ts";
import { checkContextOptions, SessionContext } from "./session-context.ts";
import { createSpill, sessionSpillDir } from "./spill-output.ts";
import { defaultLeaseOwner } from "./take-lease.ts";

const isInstructions = (v: unknown) => typeof v === "string" || typeof v === "function";

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
  logger: () => Logger,
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
    onWarning: (message) => logger().warn(message),
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
  // Timers: at most the longest delay a timer can take (MAX_TIMER_MS); Infinity waits that long.
  const timer = (name: string, value: number | undefined) =>
    value === undefined
      ? undefined
      : Math.min(checkDuration(`createAgent: \`${name}\``, value, 1), MAX_TIMER_MS);
  const stopDeadlineMs = timer("stopDeadlineMs", options.stopDeadlineMs);
  const finalizeDeadlineMs = timer("finalizeDeadlineMs", options.finalizeDeadlineMs);
  const dormantAfterMs =
    options.dormantAfterMs === undefined
      ? 30_000
      : checkDuration("createAgent: `dormantAfterMs`", options.dormantAfterMs);
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
  const told = (line: string) => {
    try {
      (options.onProblem ?? ((l: string) => logger.warn(l)))(line);
    } catch {
      // Contract: must not throw; a throw changes nothing here.
    }
  };
  const { prices, promptBudget, agentSpend } = agentBudgetOptions(
    { ...options, onProblem: told },
    limits,
  );
  const price = prices?.[options.model.name];
  checkContextOptions(options.context);
  checkAcceptanceOptions(options.acceptance);
  const contextOptions = options.context ?? {};
  if (options.instructions !== undefined && !isInstructions(options.instructions)) {
    throw new TypeError(
      `createAgent: \`instructions\` must be a string or a function (session) => string, got ${typeof options.instructions}`,
    );
  }
  const sessions = new Map<string, Session>();
  const problemOnce = onceOnly(told);
  // A store that cannot reopen a log synchronously keeps its sessions in memory.
  const dormancy =
    dormantAfterMs !== Number.POSITIVE_INFINITY && reopensSync(store)
      ? new Dormancy(dormantAfterMs, clock, logger)
      : undefined;
  if (contextOptions.readResultTool)
    registry.add(readResultTool((id) => sessions.get(id)?.sessionLog));
  // Checked here, once: a bad policy is a RangeError from createAgent, not a failed turn later.
  const retry = resolveRetryPolicy(options.retry ?? {});
  const slots = resolveSlots(options.concurrency);
  const loopGuard = resolveLoopGuard(options.loopGuard);
  const continueTurns = resolveRecovery(options.recovery);
  const inspect = options.inspect;
  const traces = options.telemetry?.forAgent(options.model);
  // Every session event goes to the inspector's sink and to telemetry, when either is on; a
  // sink that throws fails nothing (actors/safe-sinks.ts).
  const { publish, observe } = safeSinks(inspect, traces, logger);
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
      const own = sessionBudgetOptions(sessionOptions, promptBudget, limits, options.model, prices);
      // Made where it is used, not kept per session: a pino child is ~0.4 KB, and the session's
      // own parts log only warnings and errors. A turn's dependencies keep one while awake.
      const sessionLogger = () => logger.child({ sessionId });
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
        openLogSync: () => SessionLog.openSync({ sessionId, store, clock, ids }),
        rested: dormancy && (() => dormancy.rested(session)),
        onClosed: () => {
          dormancy?.forget(session);
          if (sessions.get(sessionId) === session) sessions.delete(sessionId);
        },
        recover: (log) =>
          recoverCalls({
            log,
            registry: tools,
            logger: sessionLogger(),
            ...(traces ? { onSettled: (entry) => traces.recovered(sessionId, entry) } : {}),
            ...(continueTurns ? { continueTurns } : {}),
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
                logger: sessionLogger(),
                emit,
                inspect: observe,
                followUp,
                machine: options.acceptanceMachine,
              })
          : undefined,
        inspect: observe,
        publish,
        deps: (log, emit, poll, carried) => ({
          sessionId,
          log,
          model: options.model,
          registry: tools,
          clock,
          ids,
          logger: sessionLogger(),
          emit,
          retry,
          retryBudget: options.retryBudget,
          slots,
          random,
          limits,
          budgets:
            carried?.budgets?.rebind(log) ??
            new SessionBudgets({
              log,
              clock,
              session: own.session,
              prompt: own.prompt.budget,
              promptDefaulted: own.prompt.defaulted,
              agent: agentSpend,
            }),
          price,
          context:
            carried?.context.rebind(log) ??
            new SessionContext({
              log,
              model: options.model,
              registry: tools,
              ids,
              emit,
              options: contextOptions,
              clock,
              ...(price ? { price } : {}),
            }),
          // Each recovery keeps less, then clips (actors/session-context.ts): room for all three.
          maxOverflowRecoveries: contextOptions.overflowRecoveries ?? 3,
          maxParallelToolCalls: options.maxParallelToolCalls ?? 8,
          stopDeadlineMs: stopDeadlineMs ?? 5000,
          finalizeDeadlineMs: finalizeDeadlineMs ?? 10_000,
          inspect: observe,
          poll,
          spill: createSpill(sessionSpillDir(dataDir, sessionId)),
          turnMachine: options.turnMachine,
          loopGuard,
          permissions: carried
            ? carried.permissions
            : options.permissions
              ? (options.permissionBroker?.(options.permissions) ??
                new PermissionBroker(options.permissions, clock))
              : new PermissionBroker({}, clock, {
                  declaresHigh: (name) => tools.get(name)?.traits?.risk === "high",
                  onProblem: problemOnce,
                }),
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
    async deleteSession(id) {
      await agent.closeSession(id);
      return deleteStoredSession(store, id, { dataDir });
    },
    async close() {
      await Promise.all([...sessions.values()].map((s) => s.close()));
      sessions.clear();
      dormancy?.stop();
      if (unwatch) await (await unwatch.catch(() => async () => {}))();
    },
  };
  return agent;
}

/** `report`, called for the first line only; a throw from it is swallowed (it must not fail a turn). */
function onceOnly(report: (line: string) => void): (line: string) => void {
  let told = false;
  return (line) => {
    if (told) return;
    told = true;
    try {
      report(line);
    } catch {}
  };
}
