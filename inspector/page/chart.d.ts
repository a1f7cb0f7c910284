// Types for the page's chart view (plain JS, run in the browser; its pure parts unit-tested under Node).
import type { Chart } from "../chart.ts";

export interface LastTransition {
  from: string;
  to: string;
  event?: string;
}

export function activeStates(state: string | undefined): Set<string>;
export function takenEdge(
  chart: Pick<Chart, "edges">,
  last: LastTransition | undefined,
): { id: string; index: number } | undefined;
export function createChartView(
  root: HTMLElement,
  options: { request: (machine: string) => boolean; title: HTMLElement },
): { refresh(): void; receive(message: object): void; render(node: object | undefined): void };
