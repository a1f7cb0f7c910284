// What `createAgent` and `agent.session` take, and the Agent they make (docs/embedding.md):
// the options' types and their contracts. The agent itself is made in actors/agent.ts.
import type { Logger } from "pino";
import type { Budget, PriceTable } from "../contracts/budget.ts";
import type { Clock } from "../contracts/clock.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import type { Model } from "../contracts/model.ts";
import type { acceptanceMachine } from "../machines/acceptance.machine.ts";
import type { DrainMode, DrainPolicy } from "../machines/policies/inbox.ts";
import type { LoopGuardOptions } from "../machines/policies/loop-guard.ts";
import type { RetryPolicy } from "../machines/policies/retry-policy.ts";
import type { HandoffRecord } from "../session/entries.ts";
import type { SessionStore, SessionSummary } from "../session/store.ts";
import type { Registry } from "../tools/registry.ts";
import type { ToolSource } from "../tools/tool-set.ts";
import type { ToolDefinition } from "../tools/types.ts";
import type { AcceptanceOptions } from "./acceptance-spec.ts";
import type { LimitsOption } from "./budget-options.ts";
import type { DeletedSessionData } from "./delete-session.ts";
import type { InspectSink } from "./events.ts";
import type { PermissionBroker, PermissionOptions } from "./permissions.ts";
import type { SharedSpend } from "./postgres-agent-budget.ts";
import type { ProviderSlots } from "./provider-slots.ts";
import type { RetryBudget } from "./retry-budget.ts";
import type { Session } from "./session.ts";
import type { ContextOptions } from "./session-context.ts";
import type { SessionRole } from "./session-options.ts";
import type { Telemetry } from "./telemetry.ts";
import type { TurnDeps } from "./turn-scope.ts";

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
  /** Each turn's budget (docs/embedding.md, "Budgets"); `maxSteps` defaults to 50. */
  limits?: LimitsOption;
  /** Each prompt's budget (its turn and acceptance rounds). Default: 4 × `maxSteps`, one hour. */
  promptBudget?: Budget;
  /** The agent's budget: every session of this agent in this process, summed. Default: none. */
  budget?: Budget;
  /** Prices per million tokens by `model.name` (Keel ships none); needed by any `maxCost`. */
  prices?: PriceTable;
  /** Default 8. */
  maxParallelToolCalls?: number;
  /**
   * How long a session stays idle before it lets its log go (docs/embedding.md, "Idle sessions sleep"): a session
   * that sleeps holds no history, projection or per-turn state, and its next read or input
   * reopens them from the store's checkpoint, synchronously, in O(projection). It sleeps only
   * when no turn runs, no input is queued, it has no acceptance spec, this process writes its
   * log, and the store reads checkpoints synchronously (memory, SQLite; PostgreSQL sessions stay
   * in memory). Default 30 000 ms; `Infinity` keeps every session in memory.
   */
  dormantAfterMs?: number;
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
  /**
   * Told of problems the agent worked around that its embedder should fix, one line each: a
   * high-risk call refused for want of a `permissions` option (once an agent), the first response
   * charged by Keel's estimate because the provider reported no usage (once an agent), and every
   * reported usage replaced as not plausible (docs/embedding.md, "Budgets"; each is also a
   * `log.written` warning of its session). Default: the logger's `warn`. Contract: must not
   * throw (a throw is ignored).
   */
  onProblem?: (line: string) => void;
  /**
   * The agent's spend shared with its other processes (`postgresAgentSpend(pool, { name })`):
   * the agent's `budget` then counts what every process sharing it spent, and stops them all.
   */
  sharedSpend?: SharedSpend;
  /** The inspector (or any sink): sees every actor's events and every session event. */
  inspect?: InspectSink;
  /**
   * OpenTelemetry traces (`await openTelemetry()`): spans for turns, model requests, tool calls
   * and compactions, from the session events. Absent: `@opentelemetry/api` is never loaded.
   */
  telemetry?: Telemetry;
  /**
   * Permission rules and the embedder's approver. Absent: a call to a tool that declares risk
   * `high` (the built-in `shell`, MCP tools annotated destructive or open-world) is refused with
   * feedback to the model and one `onProblem` line; every other call runs. Present: rules first,
   * then defaults by risk (high asks); a decline ends the turn, a decline with feedback becomes
   * the call's result (docs/permissions.md).
   */
  permissions?: PermissionOptions;
  /**
   * What the process that opens or takes over a session does with a turn a crash cut
   * (docs/crashes.md). `"continue"` (default): asks the model again under the same turn, with the
   * original request and everything durable (a cut call is `unknown` and not re-run; an
   * idempotent one re-ran with its key; a permission request asked before the crash is pending
   * again), and the turn ends with its real status; a turn cut again after 3 continuations is
   * closed `failed` with code `CRASH_LOOP` (`{ maxContinuations }` sets the bound and continues).
   * `"close"`: the cut turn ends `failed` ("process ended during the turn").
   */
  recovery?: "continue" | "close" | { maxContinuations: number };
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
  /** The session's budget, across its turns and reopenings (spend read from its log). */
  budget?: Budget;
  /** Each prompt's budget in this session, in place of the agent's `promptBudget`. */
  promptBudget?: Budget;
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
  /**
   * Deletes a session and everything it owns: closes it if it is open here, then removes it
   * from the store (entries, checkpoint, posted inputs, lease, ledger rows of its calls) and
   * removes the folder of its files under `dataDir` (spilled outputs). Refused by the store
   * (`StoreError` `FENCED`) while another process runs the session. See docs/stores.md.
   */
  deleteSession(id: string): Promise<DeletedSessionData>;
  /** Interrupts running turns, waits for them to settle and flushes every log. */
  close(): Promise<void>;
}
