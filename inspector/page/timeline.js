// The timeline: one row per tool call with a bar per state, the model's attempts and retry
// waits on a lane above, turns above that. Positions are CSS calc() over two variables on the
// container (--s px/ms, --now ms since t0), so moving time costs two style writes per frame.
import { fmtMs, h, setAttr, setText, shortId } from "./dom.js";

const MAX_ROWS = 400;
const FINAL = new Set(["settled", "unknown"]);
const OUTCOME_MARK = {
  completed: "✓",
  failed: "✗",
  cancelled: "⊘",
  not_executed: "⊘",
  unknown: "?",
};

const px = (x) => `calc(var(--s) * ${x.toFixed(1)} * 1px)`;
const openWidth = (x) => `calc((var(--now) - ${x.toFixed(1)}) * var(--s) * 1px)`;

function bar(cls, x0, x1, title) {
  const el = h("div", { class: cls, title });
  place(el, x0, x1);
  return el;
}

function place(el, x0, x1) {
  el.style.left = px(x0);
  el.style.width = x1 === undefined ? openWidth(x0) : px(Math.max(0, x1 - x0));
}

/** Creates the timeline inside `root`; `onSelect(id)` when a bar is clicked. */
export function createTimeline(root, onSelect) {
  const ticks = h("div", { class: "ticks" });
  const turnTrack = h("div", { class: "track" });
  const modelTrack = h("div", { class: "track" });
  const rows = h("div", { class: "rows" });
  const note = h("div", { class: "note", hidden: true });
  const empty = h("div", {
    class: "empty",
    text: "Tool calls appear here as bars: queued → started → settled.",
  });
  root.append(
    h("div", { class: "trow axis" }, h("div", { class: "lbl" }), ticks),
    h("div", { class: "trow tlane" }, h("div", { class: "lbl", text: "turns" }), turnTrack),
    h("div", { class: "trow tlane" }, h("div", { class: "lbl", text: "model" }), modelTrack),
    note,
    rows,
    empty,
  );
  let t0 = Number.NaN;
  const callEls = new Map(); // callId → { row, track, sig }
  const laneEls = new Map(); // key → { el, sig }
  let lastSpan = -1;

  function reset() {
    for (const el of callEls.values()) el.row.remove();
    for (const el of laneEls.values()) el.el.remove();
    callEls.clear();
    laneEls.clear();
    lastSpan = -1;
  }

  function renderCall(call) {
    let el = callEls.get(call.id);
    if (!el) {
      const name = h("span", { class: "nm" });
      const track = h("div", { class: "track" });
      const row = h(
        "div",
        { class: "trow call", "data-call-id": call.id },
        h("div", { class: "lbl" }, name, h("span", { class: "cid", text: shortId(call.id, 6) })),
        track,
      );
      row.addEventListener("click", () => onSelect(call.id));
      rows.append(row);
      el = { row, track, name, sig: "" };
      callEls.set(call.id, el);
      if (callEls.size > MAX_ROWS) {
        const [oldest, old] = callEls.entries().next().value;
        old.row.remove();
        callEls.delete(oldest);
      }
    }
    const sig = `${call.name}|${call.state}|${call.segs.length}|${call.outcome}`;
    if (sig === el.sig) return;
    el.sig = sig;
    setText(el.name, call.name || "…");
    setAttr(el.row, "data-state", call.state || "queued");
    setAttr(el.row, "data-outcome", call.outcome || "");
    const outcome = call.outcome ? ` o-${call.outcome}` : "";
    const parts = [];
    for (let i = 0; i < call.segs.length; i++) {
      const seg = call.segs[i];
      if (FINAL.has(seg.s)) continue;
      const next = call.segs[i + 1];
      const x0 = seg.t - t0;
      parts.push(
        bar(
          `seg s-${seg.s}${outcome}`,
          x0,
          next ? next.t - t0 : undefined,
          `${seg.s}${next ? ` ${fmtMs(next.t - seg.t)}` : " (running)"}`,
        ),
      );
    }
    const last = call.segs[call.segs.length - 1];
    const first = call.segs[0];
    if (last && FINAL.has(last.s)) {
      const started = call.segs.find((s) => s.s === "started");
      const took = started ? last.t - started.t : 0;
      const label = h("span", {
        class: `dur o-${call.outcome || last.s}`,
        text: `${OUTCOME_MARK[call.outcome] ?? "•"} ${started ? fmtMs(took) : call.outcome || last.s}`,
      });
      label.style.left = `calc(${px(last.t - t0)} + 6px)`;
      const cap = h("div", { class: `cap o-${call.outcome || last.s}` });
      cap.style.left = px(last.t - t0);
      parts.push(cap, label);
    } else if (first) {
      const label = h("span", { class: "dur live", text: call.state });
      label.style.left = "calc(var(--now) * var(--s) * 1px + 6px)";
      parts.push(label);
    }
    el.track.replaceChildren(...parts);
    el.track.title = `${call.name} ${call.id}\n${call.args ?? ""}${call.result ? `\n→ ${call.result.ok ? call.result.content : `${call.result.code}: ${call.result.message}`}` : ""}`;
  }

  function lane(key, track, sig, make) {
    const cached = laneEls.get(key);
    if (cached?.sig === sig) return;
    const el = make();
    if (cached) cached.el.replaceWith(el);
    else track.append(el);
    laneEls.set(key, { el, sig });
  }

  function renderLanes(model) {
    for (const turn of model.turns.values()) {
      lane(`t:${turn.id}`, turnTrack, `${turn.status}|${turn.end}|${turn.marks.length}`, () => {
        const el = bar(
          `lane-bar turn st-${turn.status}`,
          turn.t - t0,
          turn.end === undefined ? undefined : turn.end - t0,
          `${turn.id} ${turn.status}${turn.reason ? `: ${turn.reason}` : ""}`,
        );
        el.append(h("span", { text: `${shortId(turn.id, 6)} ${turn.status}` }));
        for (const mark of turn.marks) {
          const m = h("i", { class: "mark", title: `${mark.label} +${fmtMs(mark.t - turn.t)}` });
          m.style.left = px(mark.t - turn.t);
          el.append(m);
        }
        return el;
      });
    }
    for (const a of model.attempts.values()) {
      lane(`a:${a.id}`, modelTrack, `${a.status}|${a.end}`, () => {
        const el = bar(
          `lane-bar attempt st-${a.status}`,
          a.t - t0,
          a.end === undefined ? undefined : a.end - t0,
          `attempt ${a.id} step ${a.step}: ${a.status}${a.error ? ` (${a.error})` : ""}`,
        );
        el.append(h("span", { text: `step ${a.step}` }));
        return el;
      });
    }
    for (const [i, w] of model.retries.entries()) {
      lane(`r:${i}`, modelTrack, "wait", () => {
        const el = bar(
          "lane-bar rwait",
          w.t - t0,
          w.readyAt - t0,
          `retry ${w.retry} (${w.mode}) after ${w.reason}: ready at +${fmtMs(w.readyAt - t0)}`,
        );
        el.append(h("span", { text: `wait ${fmtMs(w.delayMs)}` }));
        return el;
      });
    }
  }

  return {
    reset,
    /** Draws the model as of `tEnd` (clock ms): the live now, or the scrubber's position. */
    render(model, tEnd) {
      if (!Number.isFinite(model.t0)) return;
      if (model.t0 !== t0) {
        reset();
        t0 = model.t0;
        for (const id of model.calls.keys()) model.dirty.calls.add(id);
      }
      if (model.dirty.calls.size > 0) {
        for (const id of model.dirty.calls) renderCall(model.calls.get(id));
        model.dirty.calls.clear();
        empty.hidden = callEls.size > 0;
        note.hidden = model.calls.size <= MAX_ROWS;
        setText(note, `showing the last ${MAX_ROWS} of ${model.calls.size} calls`);
      }
      if (model.dirty.timeline) renderLanes(model);
      model.dirty.timeline = false;
      const span = Math.max(1, tEnd - t0);
      const width = Math.max(50, modelTrack.clientWidth - 70);
      root.style.setProperty("--s", String(width / span));
      root.style.setProperty("--now", span.toFixed(1));
      if (Math.abs(span - lastSpan) / span > 0.005) {
        lastSpan = span;
        const raw = span / 6;
        const mag = 10 ** Math.floor(Math.log10(raw));
        const step = [1, 2, 5, 10].map((m) => m * mag).find((m) => m >= raw) ?? raw;
        const labels = [];
        for (let x = 0; x <= span; x += step) {
          const tick = h("span", { class: "tick", text: fmtMs(x) });
          tick.style.left = px(x);
          labels.push(tick);
        }
        ticks.replaceChildren(...labels);
      }
    },
  };
}
