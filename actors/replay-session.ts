import type { Clock } from "../contracts/clock.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { LogEntry } from "../session/entries.ts";
import { type Divergence, firstDivergence } from "../session/replay-compare.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import type { ToolDefinition } from "../tools/types.ts";
import { createAgent } from "./agent.ts";
import type { AgentOptions } from "./agent-options.ts";
import type { InspectSink } from "./events.ts";
import { seededIds } from "./ids.ts";
import { replayClock } from "./replay-clock.ts";
import {
  type RecordedModelTraits,
  type Recording,
  readRecording,
  recordedApprover,
  recordedModel,
  recordedTools,
  standInTools,
} from "./replay-recording.ts";
import type { Session } from "./session.ts";

/** `replaySession` options. */
export interface ReplayOptions {
  /** The stored session's id (the replay runs a session of the same id on a scratch store). */
  sessionId: string;
  /** Its log, as the store holds it (`store.load(sessionId)`). */
  entries: readonly LogEntry[];
  /**
   * The tools the session is replayed with: their names, descriptions, parameters and traits
   * are the current ones (they decide preparation, scheduling and what the model is offered);
   * their `execute` is never called: each call returns the result the log recorded. Absent:
   * stand-ins named after the tools the log's turns offered and called, taking any arguments
   * and run in parallel (`standInTools`): a view of the log, not a check of the tools.
   */
  tools?: readonly ToolDefinition[];
  /**
   * What the recorded session's model declared (its context window, which decides when the
   * runtime compacts; its name, capabilities…): the log does not record it. Default: no window
   * (no automatic compaction), images taken, Continue after a cut answer.
   */
  model?: RecordedModelTraits;
  /** The instructions to replay with. Default: those the log recorded first. */
  instructions?: string;
  /**
   * The rest of the agent's configuration, as the recorded session had it (limits, retry,
   * loop guard, context, drain, permission rules…), and the test seams (a variant of a chart).
   * The replay sets the model, tools, store and clock itself, and answers permission requests
   * with the replies the log recorded (`recordedApprover`) when `permissions` is given.
   */
  agent?: Omit<AgentOptions, "model" | "tools" | "store" | "clock" | "inspect" | "instructions">;
  /**
   * Sees every actor's inspection events and every session event of the replay (the
   * inspector), or makes the sink from the replay's clock (to stamp what it sees with the
   * recording's times).
   */
  inspect?: InspectSink | ((clock: Clock) => InspectSink);
  /**
   * Called once the replayed session is idle after the last recorded input, before the
   * scratch agent closes (what an inspector shows ends here: closing is not the recording's).
   * Contract: must not throw.
   */
  onIdle?: () => void;
  /** Real milliseconds the replay may take before it is given up. Default 60 000. */
  timeoutMs?: number;
}

/** What a replay wrote, and where it first differs from the recording. */
export interface ReplayReport {
  sessionId: string;
  /** The recorded entries compared. */
  recorded: number;
  /** The entries the replay wrote. */
  entries: LogEntry[];
  /** The first difference (see `firstDivergence`), or undefined when the replay wrote the log. */
  divergence: Divergence | undefined;
}

/**
 * Replays a stored session through the current charts and hosts: a real session of this Keel
 * (`createAgent`, whatever charts it runs) on a scratch memory store, whose model answers from
 * the recording (`recordedModel`) and whose tools return the recorded results
 * (`recordedTools`), so no model and no tool runs. The recorded inputs are posted again, with
 * their ids, where the recording has them: before the model answer or tool result that followed
 * them, else when the session is idle. Time is the recording's (`replayClock`): timers fire when
 * the session is quiet; ids come from a seeded generator, so a replay of one log is the same
 * every time. Then what it wrote is compared with the log (`firstDivergence`).
 * Rejects only on a misuse (no entries) or when the replay runs past `timeoutMs`.
 */
export async function replaySession(options: ReplayOptions): Promise<ReplayReport> {
  const { sessionId, entries } = options;
  if (entries.length === 0) {
    throw new RangeError(`replay: session "${sessionId}" has no entries to replay`);
  }
  const recording = readRecording(sessionId, entries);
  const clock = replayClock(entries[0].at);
  const store = memoryStore();
  let endReplay = () => {};
  const ended = new Promise<void>((resolve) => {
    endReplay = resolve;
  });
  let session: Session | undefined;
  const inputs = inputPoster(recording, () => session);
  const gate = async (at: number) => {
    clock.touch();
    // The calls of one batch all start before an input lands (an interrupt would cancel those
    // not started yet, which the recording had running).
    await new Promise((resolve) => setImmediate(resolve));
    await inputs.postDue();
    clock.advanceTo(at);
  };
  const agent = createAgent({
    ...options.agent,
    model: recordedModel(recording, gate, options.model),
    tools: recordedTools(options.tools ?? standInTools(recording), recording, gate, ended),
    store,
    clock,
    // The rules are the caller's (the session's configuration); the replies are the log's.
    ...(options.agent?.permissions
      ? { permissions: { ...options.agent.permissions, ask: recordedApprover(recording, gate) } }
      : {}),
    instructions: options.instructions ?? recording.instructions,
    inspect: touching(
      clock,
      typeof options.inspect === "function" ? options.inspect(clock) : options.inspect,
    ),
    // A replay of one log is the same every time: the same ids, the same records.
    ids: options.agent?.ids ?? seededIds(1),
    random: options.agent?.random ?? (() => 0.5),
    dormantAfterMs: Number.POSITIVE_INFINITY,
    lease: false,
  });
  const timeoutMs = options.timeoutMs ?? 60_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    session = await agent.openSession(sessionId);
    session.subscribe(() => clock.touch());
    const run = inputs.postAll(clock);
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `replay of session "${sessionId}": not finished after ${timeoutMs} ms (a recorded wait the replay cannot reach?)`,
            ),
          ),
        timeoutMs,
      );
    });
    await Promise.race([run, late]);
    options.onIdle?.();
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    endReplay();
    await agent.close();
    clock.stop();
  }
  const written = await store.load(sessionId);
  return {
    sessionId,
    recorded: entries.length,
    entries: written,
    divergence: firstDivergence(entries, written),
  };
}

/**
 * Posts the recorded inputs, each once, in order. Inputs the recording holds back to back
 * (consecutive seqs) are posted back to back, without waiting for the first to be durable, as
 * a caller that sent them together did.
 */
function inputPoster(recording: Recording, session: () => Session | undefined) {
  const { inputs } = recording;
  let next = 0;
  const failures: unknown[] = [];
  const post = async (input: Recording["inputs"][number]) => {
    const s = session()!;
    const options = { id: input.inboxId, source: input.source };
    const text = input.parts ?? input.body;
    if (input.lane === "interrupt") await s.interrupt(input.body, options);
    else if (input.lane === "next-step") await s.steer(text, options);
    else await s.followUp(text, options);
  };
  /** Posts inputs from `next` while each is due after `reached`; resolves once all are durable. */
  const postRun = (reached: number, clock?: { advanceTo(t: number): void }) => {
    const posted: Promise<void>[] = [];
    while (next < inputs.length && reached >= inputs[next].seq - 1) {
      const input = inputs[next++];
      clock?.advanceTo(input.at);
      posted.push(post(input));
      reached = input.seq;
    }
    return Promise.all(posted);
  };
  const lastSeq = () => session()?.sessionLog.lastSeq ?? -1;
  return {
    /**
     * Posts the inputs whose place in the recording the replay has reached, and resolves once
     * their entries are in the log (an input's entry is placed at once; durability, which an
     * interrupt's post also waits for the turn to settle to reach, is not waited for).
     */
    async postDue(): Promise<void> {
      const posted = postRun(lastSeq());
      posted.catch((error: unknown) => failures.push(error));
      await new Promise((resolve) => setImmediate(resolve));
    },
    /**
     * Posts every input: at its place when a gate reaches it, else once the session is idle;
     * resolves when the session is idle after the last one.
     */
    async postAll(clock: { advanceTo(t: number): void }): Promise<void> {
      const s = session()!;
      while (next < inputs.length) {
        if (lastSeq() < inputs[next].seq - 1) await reachedOrIdle(s, inputs[next].seq - 1);
        if (next >= inputs.length) break;
        // Idle, or at its place: this input, and those the recording has right after it.
        await postRun(Math.max(lastSeq(), inputs[next].seq - 1), clock);
        // The inputs' own effects (a turn starting) before the next one is considered.
        await new Promise((resolve) => setImmediate(resolve));
      }
      await s.awaitIdle();
      if (failures.length > 0) throw failures[0];
    },
  };
}

/**
 * Resolves once the session's log holds `seq` entries (checked at each of its events: the input
 * lands where the recording has it, as a caller waiting for that moment sent it) or the session
 * is idle (the replay wrote less than the recording: the comparison will say where).
 */
function reachedOrIdle(session: Session, seq: number): Promise<void> {
  return new Promise<void>((resolve) => {
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      unsubscribe();
      resolve();
    };
    const unsubscribe = session.subscribe(() => {
      if (session.sessionLog.lastSeq >= seq) done();
    });
    session.awaitIdle().then(done, done);
  });
}

/** `sink` with every event also telling the clock the session is not quiet. */
function touching(clock: { touch(): void }, sink: InspectSink | undefined): InspectSink {
  return {
    observe(event) {
      clock.touch();
      sink?.observe(event);
    },
    publish(event: AgentEvent) {
      clock.touch();
      sink?.publish(event);
    },
  };
}
