// The actor tree: session → coordinator/turn → attempts, batch → calls, each with its state.
// Incremental: only nodes marked dirty by the model are touched.
import { h, setAttr, setText, shortId } from "./dom.js";

const KIND_LABEL = {
  session: "session",
  coordinator: "coord",
  turn: "turn",
  attempt: "attempt",
  batch: "batch",
  call: "call",
  actor: "actor",
};

/** Creates the tree view inside `root`; `onSelect(id)` is called when a row is clicked. */
export function createTree(root, onSelect) {
  const els = new Map(); // node key → { wrap, row, label, state, kids, parent }
  const empty = h("div", {
    class: "empty",
    text: "Nothing has run here yet: a session appears here, with its turns and tool calls, as soon as it starts.",
  });
  root.append(empty);

  function build(node) {
    const caret = h("span", { class: "caret", title: "collapse / expand" });
    const label = h("span", { class: "label" });
    const state = h("span", { class: "st" });
    const row = h(
      "div",
      { class: "row" },
      caret,
      h("span", { class: `kind k-${node.kind}`, text: KIND_LABEL[node.kind] ?? node.kind }),
      label,
      state,
    );
    const kids = h("div", { class: "kids" });
    const wrap = h(
      "div",
      { class: "node", "data-actor-id": node.id, "data-kind": node.kind },
      row,
      kids,
    );
    caret.addEventListener("click", (event) => {
      event.stopPropagation();
      wrap.classList.toggle("collapsed");
    });
    row.addEventListener("click", () => onSelect(node.id));
    const el = { wrap, row, label, state, kids, parent: null };
    els.set(node.key, el);
    return el;
  }

  function place(model, node, el) {
    const parentKey = node.parent && model.nodes.has(node.parent) ? node.parent : null;
    if (el.wrap.isConnected && el.parent === parentKey) return;
    el.parent = parentKey;
    if (parentKey) {
      const parentEl = els.get(parentKey) ?? ensure(model, model.nodes.get(parentKey));
      parentEl.kids.append(el.wrap);
      parentEl.wrap.classList.add("has-kids");
    } else {
      root.append(el.wrap);
    }
  }

  function ensure(model, node) {
    const el = els.get(node.key) ?? build(node);
    place(model, node, el);
    return el;
  }

  function update(model, node, el) {
    let text = node.id;
    if (node.kind === "call") {
      const call = model.calls.get(node.id);
      text = `${call?.name || "?"} · ${shortId(node.id)}`;
      if (call?.outcome) setAttr(el.wrap, "data-outcome", call.outcome);
    } else if (node.kind === "attempt") {
      const attempt = model.attempts.get(node.id);
      const dot = node.id.lastIndexOf(".");
      text = `step ${attempt?.step ?? "?"} · ${dot > 0 ? node.id.slice(dot + 1) : shortId(node.id)}`;
    } else if (node.kind === "actor" && node.machine) {
      text = `${node.machine} · ${node.id}`;
    }
    setText(el.label, text);
    el.label.title = `${node.id}${node.machine ? ` (${node.machine})` : ""}${node.sid ? ` [${node.sid}]` : ""}`;
    const state = node.state || node.status;
    setText(el.state, state);
    setAttr(el.state, "class", `st st-${state.split(/[.,\s]/)[0] || "none"}`);
    setAttr(el.wrap, "data-state", state);
    setAttr(el.wrap, "data-status", node.status);
    el.wrap.classList.toggle("finished", node.status !== "active" || Boolean(node.ended));
  }

  return {
    render(model) {
      if (model.dirty.nodes.size === 0) return;
      let newTurn;
      for (const key of model.dirty.nodes) {
        const node = model.nodes.get(key);
        if (!node) continue;
        if (!els.has(key) && node.kind === "turn") newTurn = key;
        update(model, node, ensure(model, node));
      }
      model.dirty.nodes.clear();
      if (newTurn !== undefined) {
        // Keep the tree readable: older finished turns fold away (click the caret to open);
        // the newest stays open, finished or not (a replay scrubbed to its end draws it so).
        for (const [key, el] of els) {
          const node = model.nodes.get(key);
          if (key !== newTurn && node?.kind === "turn" && node.ended) {
            el.wrap.classList.add("collapsed");
          }
        }
      }
      empty.hidden = els.size > 0;
    },
    reset() {
      for (const el of els.values()) el.wrap.remove();
      els.clear();
      empty.hidden = false;
    },
  };
}
