// The live statechart: the selected actor's machine, drawn from its definition as the server
// laid it out (inspector/chart-layout.ts), with the actor's current state lit and the
// transition it just took marked. It reads the model, so it follows the scrubber.
import { h, setAttr, setText } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const LINE = 14;

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) el.setAttribute(key, String(value));
  }
  for (const child of children) if (child) el.append(child);
  return el;
}

/**
 * The states a state string (`a.b`, parallel regions joined by `, `) makes active: each named
 * state and its ancestors, as chart paths.
 */
export function activeStates(state) {
  const out = new Set();
  for (const region of (state ?? "").split(", ")) {
    if (!region) continue;
    const parts = region.split(".");
    for (let i = 1; i <= parts.length; i++) out.add(parts.slice(0, i).join("."));
  }
  return out;
}

/**
 * The edge and transition `last` ({ from, to, event }) took in `chart`: an edge leaving a state
 * that was active before, entering one active after, with a transition on that event (any, when
 * the event is unknown). The deepest source wins, as in XState. Undefined when the step went
 * through states no snapshot shows (eventless transitions chained in one macrostep).
 */
export function takenEdge(chart, last) {
  if (!last?.to || last.from === last.to) return undefined;
  const from = activeStates(last.from);
  const to = activeStates(last.to);
  let best;
  for (const edge of chart.edges) {
    if (!from.has(edge.source) || !to.has(edge.target)) continue;
    const index = last.event ? edge.transitions.findIndex((t) => t.event === last.event) : 0;
    if (index < 0) continue;
    const depth = edge.source.split(".").length;
    if (!best || depth > best.depth) best = { edge, index, depth };
  }
  return best && { id: best.edge.id, index: best.index };
}

function stateLines(state) {
  return [
    ...state.invokes.map((src) => `invoke ${src}`),
    ...state.stays.map((t) => `${t.label} ↺`),
  ];
}

/** Builds the SVG of a placed chart (once per machine). */
function drawChart(chart) {
  const marker = `arrow-${chart.id.replace(/[^\w-]/g, "_")}`;
  const svg = s("svg", {
    class: "chart-svg",
    viewBox: `0 0 ${chart.width} ${chart.height}`,
    width: chart.width,
    height: chart.height,
    "data-machine": chart.id,
  });
  svg.append(
    s(
      "defs",
      {},
      s(
        "marker",
        {
          id: marker,
          viewBox: "0 0 10 10",
          refX: 9,
          refY: 5,
          markerWidth: 7,
          markerHeight: 7,
          orient: "auto-start-reverse",
        },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }),
      ),
    ),
  );
  const states = new Map();
  const stateLayer = s("g", { class: "states" });
  for (const st of chart.states) {
    const compound = chart.states.some((c) => c.parent === st.path);
    const g = s("g", {
      class: `cs t-${st.type}${compound ? " compound" : ""}`,
      "data-state-path": st.path,
    });
    g.append(
      s("rect", {
        x: st.x,
        y: st.y,
        width: st.width,
        height: st.height,
        rx: compound ? 8 : 12,
      }),
    );
    if (st.type === "final") {
      g.append(
        s("rect", {
          class: "inner",
          x: st.x + 3,
          y: st.y + 3,
          width: st.width - 6,
          height: st.height - 6,
          rx: 9,
        }),
      );
    }
    if (st.initial) g.append(s("circle", { class: "initial", cx: st.x + 8, cy: st.y + 8, r: 3 }));
    const name = s("text", {
      x: compound ? st.x + 14 : st.x + st.width / 2,
      y: st.y + 17,
      class: compound ? "nm left" : "nm",
    });
    name.textContent = st.key;
    g.append(name);
    for (const [i, line] of stateLines(st).entries()) {
      const t = s("text", {
        x: compound ? st.x + 14 : st.x + st.width / 2,
        y: st.y + 17 + (i + 1) * LINE,
        class: compound ? "ln left" : "ln",
      });
      t.textContent = line;
      g.append(t);
    }
    const title = s("title");
    title.textContent = st.path;
    g.append(title);
    stateLayer.append(g);
    states.set(st.path, g);
  }
  const edges = new Map();
  const edgeLayer = s("g", { class: "edges" });
  for (const edge of chart.edges) {
    const g = s("g", {
      class: "ce",
      "data-edge": edge.id,
      "data-source": edge.source,
      "data-target": edge.target,
    });
    const d = edge.points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`);
    g.append(s("path", { d: d.join(" "), "marker-end": `url(#${marker})` }));
    const lines = [];
    for (const [i, t] of edge.transitions.entries()) {
      const text = s("text", {
        x: edge.label.x + 2,
        y: edge.label.y + (i + 1) * LINE - 3,
        class: "el",
        "data-event": t.event,
      });
      text.textContent = t.label;
      g.append(text);
      lines.push(text);
    }
    edgeLayer.append(g);
    edges.set(edge.id, { g, lines });
  }
  svg.append(stateLayer, edgeLayer);
  return { svg, states, edges, chart };
}

/**
 * Creates the chart view in `root`. `request(machine)` asks the server for a machine's placed
 * chart and returns false when it cannot yet; `receive` is called with the answer. `title` shows
 * which actor is drawn.
 */
export function createChartView(root, { request, title }) {
  const empty = h("div", { class: "empty", text: "Select an actor to see its statechart." });
  const status = h("div", { class: "chart-status muted" });
  const box = h("div", { class: "chart-box" });
  root.append(status, box, empty);
  const charts = new Map(); // machine → { placed } | { error } | { pending }
  const drawn = new Map(); // machine → drawing
  let shown; // the drawing in `box`
  let sig = "";
  let scrolledTo = ""; // the lit state last scrolled into view

  function show(drawing) {
    if (shown === drawing) return;
    box.replaceChildren(...(drawing ? [drawing.svg] : []));
    shown = drawing;
  }

  return {
    /** The panel changed size (fit, expand, window): draw again and bring the lit state into view. */
    refresh() {
      sig = "";
      scrolledTo = "";
    },
    /** A chart (or an error) arrived from the server. */
    receive(message) {
      charts.set(
        message.machine,
        message.error ? { error: message.error } : { placed: message.chart },
      );
      sig = "";
    },
    /** Draws `node`'s chart with its state lit; `node` is a model node or undefined. */
    render(node) {
      const machine = node?.machine;
      const key = `${node?.key}|${machine}|${node?.state}|${node?.last?.from}|${node?.last?.event}|${charts.get(machine) ? 1 : 0}`;
      if (key === sig) return;
      sig = key;
      setAttr(root, "data-actor-id", node?.id ?? "");
      setAttr(root, "data-machine", machine ?? "");
      setAttr(root, "data-current", node?.state ?? "");
      setText(title, node ? `${machine ?? node.kind} · ${node.id}` : "");
      if (!node || !machine) {
        empty.hidden = false;
        setText(
          empty,
          node
            ? `${node.id} has no statechart (a ${node.kind} is not an XState actor).`
            : "Select an actor to see its statechart.",
        );
        setText(status, "");
        show(undefined);
        return;
      }
      const entry = charts.get(machine);
      if (!entry && request(machine)) charts.set(machine, { pending: true });
      else if (!entry) sig = ""; // not connected yet: ask again next frame
      if (!entry?.placed) {
        empty.hidden = false;
        setText(empty, entry?.error ?? `Laying out the ${machine} chart…`);
        setAttr(root, "data-chart", entry?.error ? "error" : "loading");
        show(undefined);
        return;
      }
      empty.hidden = true;
      setAttr(root, "data-chart", "ready");
      let drawing = drawn.get(machine);
      if (!drawing) {
        drawing = drawChart(entry.placed);
        drawn.set(machine, drawing);
      }
      show(drawing);
      const active = activeStates(node.state);
      let deepest;
      for (const [path, g] of drawing.states) {
        const on = active.has(path);
        g.classList.toggle("lit", on);
        if (on && (!deepest || path.length > deepest.path.length)) deepest = { path, g };
      }
      // Keep the lit state in view when the chart is larger than the panel.
      if (deepest && deepest.path !== scrolledTo) {
        scrolledTo = deepest.path;
        const r = deepest.g.getBoundingClientRect();
        const c = root.getBoundingClientRect();
        // Only the panel scrolls (scrollIntoView would also move the page).
        if (r.left < c.left || r.right > c.right)
          root.scrollLeft += r.left + r.width / 2 - (c.left + c.width / 2);
        if (r.top < c.top || r.bottom > c.bottom)
          root.scrollTop += r.top + r.height / 2 - (c.top + c.height / 2);
      }
      const taken = takenEdge(drawing.chart, node.last);
      for (const [id, e] of drawing.edges) {
        const on = taken?.id === id;
        e.g.classList.toggle("taken", on);
        for (const [i, line] of e.lines.entries())
          line.classList.toggle("taken", on && i === taken.index);
      }
      const known = [...active].some((p) => drawing.states.has(p));
      setText(
        status,
        node.state && !known
          ? `${node.state}: not a state of this chart (${node.kind === "call" ? "the call waits in its batch; its chart starts at recording" : "reconstructed from the log"})`
          : taken
            ? `${node.last.from} → ${node.last.to} on ${node.last.event ?? "?"}`
            : node.state || node.status,
      );
    },
  };
}
