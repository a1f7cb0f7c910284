// Types for the page's model (plain JS, run in the browser; unit-tested under Node).
import type { InspectRecord } from "../records.ts";

export interface PageCall {
  id: string;
  name: string;
  turnId: string;
  state: string;
  outcome: string;
  segs: { s: string; t: number }[];
}

export interface PageNode {
  key: string;
  id: string;
  kind: string;
  state: string;
  status: string;
  parent?: string;
  sid?: string;
  /** The XState machine id of a live or replayed actor. */
  machine?: string;
  /** The transition the actor took last: from one state string to another, on an event. */
  last?: { from: string; to: string; event?: string };
}

export interface PageModel {
  t0: number;
  tLast: number;
  nodes: Map<string, PageNode>;
  byId: Map<string, string>;
  calls: Map<string, PageCall>;
  attempts: Map<string, { id: string; step: number; status: string; end?: number }>;
  retries: { readyAt: number; done: boolean; turnId: string }[];
  inbox: Map<string, { id: string; lane: string; consumedAt?: number }>;
  wake: string | null | undefined;
  tokens: { input: number; output: number };
  /** The last `context.measured`, or null before any. */
  context: { used: number; window: number; reserve: number; trusted: boolean } | null;
  /** Compactions that replaced the baseline. */
  compactions: number;
  /** The session's acceptance (apart from run status) and each check's last run. */
  acceptance: {
    status: string;
    round: number;
    checks: Map<string, { passed: boolean | undefined; round: number; running: boolean }>;
  };
}

export const CALL_RANK: Record<string, number>;
export function kindOf(machine: string | undefined): string;
export function createModel(): PageModel;
export function apply(model: PageModel, record: InspectRecord): void;
export function idsOf(record: InspectRecord, model: PageModel): (string | undefined)[];
