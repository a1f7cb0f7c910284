import { createRequire } from "node:module";
import { loadPeer } from "../contracts/optional-peer.ts";
import type { Chart, ChartEdge, ChartState } from "./chart.ts";

const require = createRequire(import.meta.url);

/** A chart with every state placed and every edge routed, in one coordinate space (px). */
export interface PlacedChart {
  id: string;
  width: number;
  height: number;
  states: PlacedState[];
  edges: PlacedEdge[];
}

export interface PlacedState extends ChartState {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface PlacedEdge extends ChartEdge {
  /** The route, start to end (the arrowhead is at the last point). */
  points: { x: number; y: number }[];
  /** Where the transitions' labels go: one line each, from the top. */
  label: { x: number; y: number; width: number; height: number };
}

/** Text metrics the page draws with (11 px monospace): used to size labels before layout. */
export const CHAR_WIDTH = 6.8;
export const LINE_HEIGHT = 14;
/** Space for a compound state's name above its children. */
const TITLE = 22;

/** Width of `lines` of chart text, with a small margin. */
const textWidth = (lines: readonly string[]) =>
  Math.ceil(Math.max(0, ...lines.map((l) => l.length)) * CHAR_WIDTH) + 4;

/** The lines a state box shows under its name: invoked actors, then transitions that stay. */
export function stateLines(state: ChartState): string[] {
  return [
    ...state.invokes.map((src) => `invoke ${src}`),
    ...state.stays.map((t) => `${t.label} ↺`),
  ];
}

interface ElkNodeIn {
  id: string;
  width?: number;
  height?: number;
  layoutOptions?: Record<string, string>;
  children?: ElkNodeIn[];
  edges?: ElkEdgeIn[];
}
interface ElkEdgeIn {
  id: string;
  sources: string[];
  targets: string[];
  labels?: { id: string; text: string; width: number; height: number }[];
}
interface ElkNodeOut extends ElkNodeIn {
  x?: number;
  y?: number;
  children?: ElkNodeOut[];
  edges?: ElkEdgeOut[];
}
interface ElkEdgeOut extends ElkEdgeIn {
  container?: string;
  sections?: {
    startPoint: { x: number; y: number };
    endPoint: { x: number; y: number };
    bendPoints?: { x: number; y: number }[];
  }[];
  labels?: { id: string; text: string; width: number; height: number; x?: number; y?: number }[];
}

/** What `layoutChart` needs of ELK: `layout(graph)` resolving to the same graph, placed. */
export interface GraphLayouter {
  layout(graph: ElkNodeIn): Promise<ElkNodeOut>;
}

let elk: Promise<GraphLayouter> | undefined;

/**
 * ELK (`elkjs`, Eclipse Layout Kernel compiled to JavaScript), loaded on the first chart a page
 * asks for: an inspector nobody opens a chart in never loads it.
 */
function defaultLayouter(): Promise<GraphLayouter> {
  if (!elk) {
    // Not kept on failure: installed later in the same process, the next chart finds it.
    const ELK = loadPeer<new () => GraphLayouter>(require, "elkjs", "the inspector's chart view");
    elk = Promise.resolve(new ELK());
  }
  return elk;
}

const ROOT = "\u0000root";

/**
 * Places `chart` with ELK's layered algorithm: compound states contain their children
 * (hierarchy handled across levels, so an edge from a nested state to a top-level one is routed
 * as one), transitions go top to bottom with their labels on the edges, routes are orthogonal.
 * Each edge is declared in the lowest state that contains both ends, as ELK expects.
 */
export async function layoutChart(chart: Chart, layouter?: GraphLayouter): Promise<PlacedChart> {
  const engine = layouter ?? (await defaultLayouter());
  const byPath = new Map(chart.states.map((s) => [s.path, s]));
  const nodes = new Map<string, ElkNodeIn>();
  const root: ElkNodeIn = {
    id: ROOT,
    layoutOptions: {
      "elk.algorithm": "layered",
      "elk.direction": "DOWN",
      "elk.hierarchyHandling": "INCLUDE_CHILDREN",
      "elk.edgeRouting": "ORTHOGONAL",
      // States in the order the machine lists them, where crossings allow.
      "elk.layered.considerModelOrder.strategy": "NODES_AND_EDGES",
      "elk.layered.spacing.nodeNodeBetweenLayers": "34",
      "elk.spacing.nodeNode": "22",
      "elk.spacing.edgeLabel": "3",
      "elk.spacing.edgeNode": "14",
      "elk.layered.spacing.edgeNodeBetweenLayers": "14",
      "elk.edgeLabels.placement": "CENTER",
      "elk.padding": "[top=12,left=12,bottom=12,right=12]",
    },
    children: [],
    edges: [],
  };
  nodes.set(ROOT, root);
  for (const state of chart.states) {
    const compound = chart.states.some((s) => s.parent === state.path);
    const lines = stateLines(state);
    const node: ElkNodeIn = compound
      ? {
          id: state.path,
          layoutOptions: {
            "elk.padding": `[top=${TITLE + lines.length * LINE_HEIGHT + 6},left=10,bottom=10,right=10]`,
            "elk.nodeSize.minimum": `(${textWidth([state.key, ...lines]) + 20},40)`,
            "elk.nodeSize.constraints": "MINIMUM_SIZE",
          },
          children: [],
          edges: [],
        }
      : {
          id: state.path,
          width: Math.max(64, textWidth([state.key, ...lines]) + 20),
          height: 28 + lines.length * LINE_HEIGHT,
        };
    nodes.set(state.path, node);
    const parent = nodes.get(state.parent ?? ROOT)!;
    parent.children!.push(node);
  }
  const ancestors = (path: string): string[] => {
    const out: string[] = [];
    for (let p = byPath.get(path)?.parent; p !== undefined; p = byPath.get(p)?.parent) out.push(p);
    return [...out, ROOT];
  };
  for (const edge of chart.edges) {
    const lines = edge.transitions.map((t) => t.label);
    const targetUp = new Set([edge.target, ...ancestors(edge.target)]);
    // The lowest state containing both ends (a self-transition lives in its state's parent).
    const container =
      ancestors(edge.source).find((a) => targetUp.has(a) && a !== edge.target) ?? ROOT;
    nodes.get(container)!.edges!.push({
      id: edge.id,
      sources: [edge.source],
      targets: [edge.target],
      labels: [
        {
          id: `${edge.id}:label`,
          text: lines.join("\n"),
          width: textWidth(lines),
          height: lines.length * LINE_HEIGHT,
        },
      ],
    });
  }
  const placed = await engine.layout(root);
  return place(chart, placed);
}

/** Reads ELK's result back into absolute coordinates. */
function place(chart: Chart, root: ElkNodeOut): PlacedChart {
  const boxes = new Map<string, { x: number; y: number; width: number; height: number }>();
  const edges = new Map<string, { edge: ElkEdgeOut; dx: number; dy: number }>();
  const walk = (node: ElkNodeOut, dx: number, dy: number) => {
    const x = dx + (node.x ?? 0);
    const y = dy + (node.y ?? 0);
    boxes.set(node.id, { x, y, width: node.width ?? 0, height: node.height ?? 0 });
    for (const edge of node.edges ?? []) edges.set(edge.id, { edge, dx: x, dy: y });
    for (const child of node.children ?? []) walk(child, x, y);
  };
  walk(root, -(root.x ?? 0), -(root.y ?? 0));
  // ELK gives an edge's coordinates relative to its container (the node it was declared in,
  // unless it reports another `container`).
  const origin = (found: { edge: ElkEdgeOut; dx: number; dy: number }) => {
    const c = found.edge.container ? boxes.get(found.edge.container) : undefined;
    return c ? { dx: c.x, dy: c.y } : { dx: found.dx, dy: found.dy };
  };
  const out: PlacedChart = {
    id: chart.id,
    width: Math.ceil(root.width ?? 0),
    height: Math.ceil(root.height ?? 0),
    states: chart.states.map((s) => ({ ...s, ...boxes.get(s.path)! })),
    edges: [],
  };
  for (const edge of chart.edges) {
    const found = edges.get(edge.id);
    if (!found) continue;
    const { dx, dy } = origin(found);
    const points: { x: number; y: number }[] = [];
    for (const section of found.edge.sections ?? []) {
      for (const p of [section.startPoint, ...(section.bendPoints ?? []), section.endPoint]) {
        points.push({ x: p.x + dx, y: p.y + dy });
      }
    }
    const label = found.edge.labels?.[0];
    out.edges.push({
      ...edge,
      points,
      label: {
        x: (label?.x ?? 0) + dx,
        y: (label?.y ?? 0) + dy,
        width: label?.width ?? 0,
        height: label?.height ?? 0,
      },
    });
  }
  return out;
}
