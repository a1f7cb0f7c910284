// Acceptance: whether the task's artifact meets its goal, as evidence bound to a version of the
// artifact. A layer of its own: never inferred from how a turn ended (docs/acceptance.md).

/**
 * `passed`: every required check passed against the current artifact version; `failed`: one
 * failed against it; `stale`: some evidence was taken against an older version (the artifact
 * changed since); `pending`: some check has no evidence yet (never ran, or was interrupted).
 */
export type AcceptanceStatus = "pending" | "passed" | "failed" | "stale";

/**
 * `check`: executable, counts for acceptance. `opinion`: model-judged or otherwise advisory;
 * recorded and shown, never counted as passed evidence.
 */
export type CheckKind = "check" | "opinion";

/** The evidence one run of one check left. */
export interface CheckEvidence {
  name: string;
  kind: CheckKind;
  passed: boolean;
  /** What the check printed or returned, bounded (head and tail kept, the cut counted). */
  output: string;
  /** Clock ms when the check started. */
  startedAt: number;
  durationMs: number;
  /**
   * The artifact version the check ran against (read when it started). When the artifact
   * changed while it ran, `<before>..<after>`: a version no artifact has, so it never counts.
   */
  artifactVersion: string;
}

/** The evidence behind an acceptance status: the current version and each check's last run. */
export interface Evidence {
  /**
   * The artifact version as last read (absent before the first read: a stored copy, being JSON,
   * has no key for it then).
   */
  artifactVersion?: string;
  checks: CheckEvidence[];
}

/** Both layers of a task, as `session.acceptance()` and a prompt's result report them. */
export interface AcceptanceReport {
  acceptance: AcceptanceStatus;
  evidence: Evidence;
  /** The version of the frozen acceptance spec the checks belong to. */
  specVersion: number;
}
