import pino, { type Logger } from "pino";
import { type Clock, systemClock } from "../contracts/clock.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import type { Model } from "../contracts/model.ts";
import type { DrainMode, DrainPolicy } from "../machines/policies/inbox.ts";
import { type RetryPolicy, resolveRetryPolicy } from "../machines/policies/retry-policy.ts";
import type { TurnLimits } from "../machines/turn.machine.ts";
import { SessionLog } from "../session/log.ts";
import { memoryStore } from "../session/memory-store.ts";
import type { SessionStore, SessionSummary } from "../session/store.ts";
import { createRegistry, type Registry } from "../tools/registry.ts";
import type { ToolDefinition } from "../tools/types.ts";
import type { InspectSink } from "./events.ts";
import { createIds } from "./ids.ts";
import { PermissionBroker, type PermissionOptions } from "./permissions.ts";
import { recoverCalls } from "./recover-calls.ts";
import type { RetryBudget } from "./retry-budget.ts";
import { Session } from "./session-runtime.ts";
import { createSpill, sessionSpillDir } from "./spill-output.ts";
import type { TurnDeps } from "./turn-runner.ts";

/** What `createAgent` takes: the model, the tools, the store, and every budget and seam. */
export interface AgentOptions {
  /** The model every session talks to (`openaiModel`, `scriptedModel`, or your own `Model`). */
  model: Model;
  /** Tools the model may call, or a registry to share and change at runtime. */
  tools?: readonly ToolDefinition[] | Registry;
  /** Where session logs live. Default: in memory (lost on exit). */
  store?: SessionStore;
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
  limits?: Partial<TurnLimits>;
  /** Default 8. */
  maxParallelToolCalls?: number;
  /** How long a cancelled tool may keep running before its outcome is unknown. Default 5 000 ms. */
  stopDeadlineMs?: number;
  /** Bound on the end-of-turn finalizer (persist, settle). Default 10 000 ms. */
  finalizeDeadlineMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Shared across sessions of one provider: bounds extra attempts when many fail at once. */
  retryBudget?: RetryBudget;
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
   * Permission rules and the embedder's approver. Absent: every call is allowed. Present:
   * rules first, then defaults by risk (high asks); a decline ends the turn, a decline with
   * feedback becomes the call's result (DESIGN §7).
   */
  permissions?: PermissionOptions;
  /** @internal Test seam: builds each session's permission broker (mutation tests only). */
  permissionBroker?: (options: PermissionOptions) => PermissionBroker;
  /** @internal Test seam: a variant of the inbox drain policy (mutation tests only). */
  lanesToDrain?: DrainPolicy;
  /** @internal Test seam: a variant of the turn statechart (mutation tests only). */
  turnMachine?: TurnDeps["turnMachine"];
}

/** Sessions over one model, tool set and store. Made by `createAgent`. */
export interface Agent {
  /** Opens (or creates) a session; `await session.ready` before reading its log. */
  session(id?: string): Session;
  /** The sessions in the store, with their entry counts and times. */
  listSessions(): Promise<SessionSummary[]>;
  /** The tools, shared by every session of this agent; change it to change what they offer. */
  readonly registry: Registry;
  /** Where the sessions' logs are kept. */
  readonly store: SessionStore;
  /** Interrupts running turns, waits for them to settle and flushes every log. */
  close(): Promise<void>;
}

export const DEFAULT_LIMITS: TurnLimits = { maxSteps: 50, maxTokens: 0, deadlineMs: 0 };

function defaultLogger(): Logger {
  const level = process.env.KEEL_LOG || "silent";
  return pino({ level, base: undefined }, pino.destination(2));
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
  positive("stopDeadlineMs", options.stopDeadlineMs);
  positive("finalizeDeadlineMs", options.finalizeDeadlineMs);
  positive("limits.maxSteps", options.limits?.maxSteps);
  if (
    options.dataDir !== undefined &&
    (typeof options.dataDir !== "string" || options.dataDir.length === 0)
  ) {
    throw new TypeError(
      `createAgent: \`dataDir\` must be a non-empty path, got ${JSON.stringify(options.dataDir)}`,
    );
  }
  const registry =
    options.tools && "resolve" in options.tools
      ? (options.tools as Registry)
      : createRegistry((options.tools as ToolDefinition[] | undefined) ?? []);
  const store = options.store ?? memoryStore();
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? createIds();
  const random = options.random ?? Math.random;
  const logger = options.logger ?? defaultLogger();
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  // Checked here, once: a bad policy is a RangeError from createAgent, not a failed turn later.
  const retry = resolveRetryPolicy(options.retry ?? {});
  const sessions = new Map<string, Session>();
  const inspect = options.inspect;
  const dataDir = options.dataDir ?? ".keel";

  const agent: Agent = {
    registry,
    store,
    session(id) {
      const sessionId = id ?? ids("s");
      const existing = sessions.get(sessionId);
      if (existing) return existing;
      const sessionLogger = logger.child({ sessionId });
      const session = new Session({
        sessionId,
        logger: sessionLogger,
        now: () => clock.now(),
        ids,
        drain: {
          steer: options.drain?.steer ?? "all",
          followUp: options.drain?.followUp ?? "one-at-a-time",
        },
        lanesToDrain: options.lanesToDrain,
        openLog: () => SessionLog.open({ sessionId, store, clock, ids }),
        recover: (log) => recoverCalls({ log, registry, logger: sessionLogger }),
        inspect: inspect ? (ev) => inspect.observe(ev) : undefined,
        publish: inspect ? (e) => inspect.publish(e) : undefined,
        deps: (log, emit, poll) => ({
          sessionId,
          log,
          model: options.model,
          registry,
          clock,
          ids,
          logger: sessionLogger,
          emit,
          retry,
          retryBudget: options.retryBudget,
          random,
          limits,
          maxParallelToolCalls: options.maxParallelToolCalls ?? 8,
          stopDeadlineMs: options.stopDeadlineMs ?? 5000,
          finalizeDeadlineMs: options.finalizeDeadlineMs ?? 10_000,
          inspect: inspect ? (ev) => inspect.observe(ev) : undefined,
          poll,
          spill: createSpill(sessionSpillDir(dataDir, sessionId)),
          turnMachine: options.turnMachine,
          permissions: options.permissions
            ? (options.permissionBroker?.(options.permissions) ??
              new PermissionBroker(options.permissions))
            : undefined,
        }),
      });
      sessions.set(sessionId, session);
      return session;
    },
    listSessions: () => store.list(),
    async close() {
      await Promise.all([...sessions.values()].map((s) => s.close()));
      sessions.clear();
    },
  };
  return agent;
}
