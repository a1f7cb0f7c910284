// Side panels: retry waits with a countdown, inbox lanes with the doorbell, header figures.
import { fmtCount, h, setAttr, setText, shortId } from "./dom.js";

const LANES = [
  ["interrupt", "interrupt", "aborts the turn at once"],
  ["next-step", "steer", "read after the batch commits"],
  ["next-turn", "follow-up", "read when the turn would end"],
];

/** Retry waits: the latest few, each counting down to its readyAt. */
export function createRetryWaits(root) {
  const list = h("div", { class: "list" });
  const empty = h("div", { class: "empty", text: "No retry waits." });
  root.append(list, empty);
  const items = new Map();
  return {
    reset() {
      list.replaceChildren();
      items.clear();
    },
    render(model, now) {
      const recent = model.retries.slice(-6);
      empty.hidden = recent.length > 0;
      const keep = new Set();
      for (const w of recent) {
        const key = `${w.attemptId}:${w.retry}:${w.t}`;
        keep.add(key);
        let item = items.get(key);
        if (!item) {
          const count = h("span", { class: "count" });
          const bar = h("div", { class: "fill" });
          item = {
            el: h(
              "div",
              { class: "wait" },
              h(
                "div",
                { class: "head" },
                h("b", { text: `${w.mode} #${w.retry}` }),
                h("span", { class: "muted", text: shortId(w.turnId, 6) }),
                count,
              ),
              h("div", { class: "reason", text: w.reason, title: w.reason }),
              h("div", { class: "meter" }, bar),
            ),
            count,
            bar,
          };
          items.set(key, item);
          list.prepend(item.el);
        }
        const left = w.readyAt - now;
        const waiting = !w.done && left > 0;
        setAttr(item.el, "data-retry-state", waiting ? "waiting" : "done");
        setText(
          item.count,
          waiting ? `${(left / 1000).toFixed(1)}s` : w.done ? "retried" : "ready",
        );
        const total = Math.max(1, w.readyAt - w.t);
        item.bar.style.width = `${Math.min(100, Math.max(0, ((now - w.t) / total) * 100)).toFixed(1)}%`;
      }
      for (const [key, item] of items) {
        if (!keep.has(key)) {
          item.el.remove();
          items.delete(key);
        }
      }
    },
  };
}

/** Inbox lanes (pending events, consumed counts) and the coordinator's doorbell. */
export function createInbox(root) {
  const bell = h("div", { class: "bell", "data-testid": "doorbell" });
  const lanes = new Map();
  const grid = h("div", { class: "lanes" });
  for (const [lane, title, help] of LANES) {
    const items = h("div", { class: "items" });
    const done = h("span", { class: "muted" });
    grid.append(
      h(
        "div",
        { class: "lane", "data-lane": lane, title: help },
        h("div", { class: "head" }, h("b", { text: title }), done),
        items,
      ),
    );
    lanes.set(lane, { items, done, sig: "" });
  }
  root.append(bell, grid);
  return {
    render(model) {
      const wake = model.wake;
      setAttr(bell, "data-wake", wake === undefined ? "unexposed" : wake === null ? "none" : wake);
      setText(
        bell,
        wake === undefined
          ? "doorbell: not exposed by this runtime"
          : wake === null
            ? "doorbell: quiet"
            : `doorbell: pending ${wake} wake`,
      );
      bell.classList.toggle("ringing", typeof wake === "string");
      const byLane = new Map(LANES.map(([lane]) => [lane, { pending: [], consumed: 0 }]));
      for (const item of model.inbox.values()) {
        const slot = byLane.get(item.lane) ?? byLane.get("next-step");
        if (item.consumedAt === undefined) slot.pending.push(item);
        else slot.consumed++;
      }
      for (const [lane, slot] of byLane) {
        const view = lanes.get(lane);
        const sig = `${slot.pending.map((i) => i.id).join(",")}|${slot.consumed}`;
        if (sig === view.sig) continue;
        view.sig = sig;
        setText(view.done, slot.consumed ? `${slot.consumed} consumed` : "");
        view.items.replaceChildren(
          ...slot.pending.slice(-8).map((i) =>
            h("span", {
              class: "chip",
              "data-inbox-id": i.id,
              title: `${i.id} from ${i.source}`,
              text: `${i.source} ${shortId(i.id, 4)}`,
            }),
          ),
        );
        if (slot.pending.length === 0)
          view.items.append(h("span", { class: "muted", text: "empty" }));
      }
    },
  };
}

/** The header's figures: sessions, actors, running calls, step, tokens. */
export function renderStats(root, model, records, dropped) {
  let running = 0;
  let settled = 0;
  for (const call of model.calls.values()) {
    if (call.state === "settled" || call.state === "unknown") settled++;
    else if (call.state) running++;
  }
  const sessions = [...model.sessions.keys()];
  const figures = [
    ["session", sessions.length === 1 ? shortId(sessions[0], 10) : `${sessions.length}`],
    ["step", String(model.step)],
    ["calls", `${running} running · ${settled} done`],
    ["tokens", `${fmtCount(model.tokens.input)} in · ${fmtCount(model.tokens.output)} out`],
    [
      "context",
      model.context
        ? `${fmtCount(model.context.used)}${model.context.trusted ? "" : "~"}${Number.isFinite(model.context.window) ? ` / ${fmtCount(model.context.window)}` : ""}${model.compactions ? ` · ${model.compactions} compacted` : ""}`
        : "—",
    ],
    ["actors", fmtCount(model.nodes.size)],
    ["records", fmtCount(records) + (dropped ? ` (${fmtCount(dropped)} dropped)` : "")],
  ];
  if (root.childElementCount !== figures.length) {
    root.replaceChildren(
      ...figures.map(([k]) =>
        h("span", { class: "fig", "data-fig": k }, h("i", { text: k }), h("b")),
      ),
    );
  }
  for (const [i, [, v]] of figures.entries()) setText(root.children[i].children[1], v);
  return { running };
}
