import type { AcceptanceReport, CheckEvidence } from "../contracts/acceptance.ts";
import { textOf } from "../contracts/messages.ts";
import type { HandoffRecord, LogEntry } from "../session/entries.ts";

/** What the embedder may say in a handoff; the rest is read from the log and the evidence. */
export interface HandoffOptions {
  /** Default: the session's first user message. */
  goal?: string;
  /** Default: the last assistant text of the session. */
  progress?: string;
  /** What is believed but was not checked (added to the checks that do not pass now). */
  assumptions?: string[];
  /** Default: one step per check that does not pass now. */
  nextSteps?: string[];
}

/**
 * A handoff record: verified facts are the checks that passed against the current artifact
 * version, each with its evidence; everything else the evidence does not show (failed, stale,
 * pending checks, opinions, the embedder's assumptions) is unverified. This is a pure function.
 */
export function buildHandoff(input: {
  sessionId: string;
  at: number;
  entries: readonly LogEntry[];
  report: AcceptanceReport;
  options: HandoffOptions;
}): HandoffRecord {
  const { report, options } = input;
  const version = report.evidence.artifactVersion;
  const counts = (c: CheckEvidence) =>
    c.kind === "check" && c.passed && c.artifactVersion === version;
  const verified = report.evidence.checks
    .filter(counts)
    .map((evidence) => ({ fact: `check "${evidence.name}" passes`, evidence }));
  const unverified: string[] = [];
  const nextSteps: string[] = [];
  for (const c of report.evidence.checks) {
    if (counts(c)) continue;
    if (c.kind === "opinion") {
      unverified.push(
        `opinion "${c.name}" ${c.passed ? "approves" : "disapproves"} (an opinion, not evidence)`,
      );
      continue;
    }
    const why =
      c.artifactVersion !== version ? "stale: the artifact changed since it ran" : "failed";
    unverified.push(`check "${c.name}" ${why}`);
    nextSteps.push(`make check "${c.name}" pass (${why})`);
  }
  unverified.push(...(options.assumptions ?? []));
  let goal = options.goal;
  let progress = options.progress;
  for (const e of input.entries) {
    if (goal === undefined && e.type === "user_message") goal = e.text;
    if (options.progress === undefined && e.type === "assistant_message") {
      const text = textOf(e.content);
      if (text) progress = text;
    }
  }
  return {
    sessionId: input.sessionId,
    at: input.at,
    goal: goal ?? "",
    progress: progress ?? "",
    specVersion: report.specVersion,
    artifactVersion: version,
    acceptance: report.acceptance,
    verified,
    unverified,
    nextSteps: options.nextSteps ?? nextSteps,
  };
}

/** The record as Markdown, for people and the next session's model. This is a pure function. */
export function handoffMarkdown(record: HandoffRecord): string {
  const list = (items: string[]) =>
    items.length > 0 ? items.map((i) => `- ${i}`).join("\n") : "- (none)";
  return [
    `# Handoff from session ${record.sessionId}`,
    "",
    `Acceptance: **${record.acceptance}** (spec version ${record.specVersion}, artifact ${record.artifactVersion ?? "unknown"})`,
    "",
    "## Goal",
    record.goal || "(not stated)",
    "",
    "## Progress",
    record.progress || "(none recorded)",
    "",
    "## Verified facts",
    record.verified.length > 0
      ? record.verified
          .map(
            (v) =>
              `- ${v.fact} — evidence: ran ${v.evidence.durationMs} ms against ${v.evidence.artifactVersion}`,
          )
          .join("\n")
      : "- (none)",
    "",
    "## Unverified assumptions",
    list(record.unverified),
    "",
    "## Next steps",
    list(record.nextSteps),
    "",
  ].join("\n");
}

/**
 * What the next session's model is told after re-running the checks a handoff marked
 * verified. This is a pure function.
 */
export function regressionText(record: HandoffRecord, report: AcceptanceReport): string {
  const now = new Map(report.evidence.checks.map((c) => [c.name, c]));
  const broken: string[] = [];
  const held: string[] = [];
  for (const v of record.verified) {
    const c = now.get(v.evidence.name);
    const holds = c?.passed === true && c.artifactVersion === report.evidence.artifactVersion;
    if (holds) held.push(v.evidence.name);
    else
      broken.push(
        `- check "${v.evidence.name}" no longer passes:\n${c?.output ?? "(it did not run)"}`,
      );
  }
  const head = `Handoff from session ${record.sessionId}: re-ran the ${record.verified.length} check(s) it verified before any new work.`;
  if (broken.length === 0) return `${head} All still hold (${held.join(", ") || "none"}).`;
  return [
    `${head} What no longer holds (fix these regressions first):`,
    ...broken,
    held.length > 0 ? `Still holding: ${held.join(", ")}.` : "",
  ]
    .filter(Boolean)
    .join("\n");
}
