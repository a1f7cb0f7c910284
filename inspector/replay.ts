import { type ReplayOptions, replaySession } from "../actors/replay-session.ts";
import type { LogEntry } from "../session/entries.ts";
import type { Divergence } from "../session/replay-compare.ts";
import type { ChartSource } from "./chart-source.ts";
import { createFeed } from "./feed.ts";
import type { InspectRecord } from "./records.ts";

/** `replayRecords` options. */
export interface ReplayRecordsOptions {
  /** The tools to replay with (see `replaySession`); absent: stand-ins named after the log's. */
  tools?: ReplayOptions["tools"];
  /** The rest of the agent's configuration, as `replaySession` takes it. */
  agent?: ReplayOptions["agent"];
  /** Told the machine of every actor the replay creates, for the statechart view. */
  charts?: ChartSource;
  /** Records kept (oldest dropped first). Default 20 000. */
  capacity?: number;
}

/** What a replay showed, and where it stopped agreeing with the log. */
export interface ReplayedRecords {
  /** The records the inspector feed took from the replay, as it takes them live. */
  records: InspectRecord[];
  divergence: Divergence | undefined;
}

/**
 * A stored session's records, from a replay through the shipped charts and hosts
 * (`replaySession`: the recorded model answers and tool results, no model or tool run). The
 * inspector's feed watches the replay's session as it watches a live one, through XState's
 * inspection events and the session's events, stamped with the recording's times. Nothing here
 * knows a chart: what the page shows is what the charts did. When the replay diverges from the
 * log, a warning record at the end says where.
 */
export async function replayRecords(
  entries: readonly LogEntry[],
  sessionId: string,
  options: ReplayRecordsOptions = {},
): Promise<ReplayedRecords> {
  let feed: ReturnType<typeof createFeed> | undefined;
  let records: InspectRecord[] = [];
  const report = await replaySession({
    sessionId,
    entries,
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.agent ? { agent: options.agent } : {}),
    inspect: (clock) => {
      feed = createFeed({ clock, charts: options.charts, capacity: options.capacity });
      return feed;
    },
    onIdle: () => {
      records = feed?.records() ?? [];
    },
  });
  feed?.close();
  const d = report.divergence;
  if (d) {
    const last = records.at(-1)?.t ?? entries.at(-1)?.at ?? 0;
    records.push({
      k: "agent",
      t: last,
      e: {
        type: "log.written",
        sessionId,
        at: last,
        level: "warn",
        message: `the replay diverges from the log at entry ${d.seq} (${d.type})${d.path ? ` at ${d.path}` : ""}: expected ${d.expected}, got ${d.got}`,
      },
    });
  }
  return { records, divergence: d };
}
