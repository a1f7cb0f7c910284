// The event log: a virtualised list (only visible rows exist in the DOM) over every record,
// with filters by type, actor and text. Appends are O(new records); a filter change is O(n).
import { fmtStamp, h, setAttr, setText } from "./dom.js";
import { idsOf } from "./model.js";

const ROW = 20;
const OVERSCAN = 10;

/** The label a record is filtered and coloured by. */
export function labelOf(r) {
  if (r.k === "agent") return r.e.type;
  if (r.k === "ev") return "@event";
  if (r.k === "snap") return "@snapshot";
  return "@actor";
}

/** One line of text describing a record. */
export function describe(r, model) {
  if (r.k === "actor")
    return `${r.id} created${r.machine ? ` (${r.machine})` : ""}${r.parent ? ` in ${model.nodes.get(model.bySid.get(r.parent))?.id ?? r.parent}` : ""}`;
  if (r.k === "snap")
    return `${r.id} → ${r.state || "(no state)"} [${r.status}]${r.wake !== undefined ? ` wake=${r.wake}` : ""}`;
  if (r.k === "ev")
    return `${r.id} ← ${r.type}${r.from ? ` from ${model.nodes.get(model.bySid.get(r.from))?.id ?? r.from}` : ""}`;
  const e = r.e;
  switch (e.type) {
    case "turn.started":
      return `${e.turnId} "${e.input}"`;
    case "attempt.started":
      return `${e.attemptId} step ${e.step} of ${e.turnId}`;
    case "attempt.queued":
      return `${e.attemptId} waits for a ${e.provider} slot (#${e.position}, ${e.limit} in flight at most)`;
    case "attempt.admitted":
      return `${e.attemptId} took a ${e.provider} slot after ${e.waitedMs} ms`;
    case "attempt.ended":
      return `${e.attemptId} ${e.status}${e.error ? `: ${e.error}` : ""}`;
    case "text.streamed":
      return `${e.attemptId} ${JSON.stringify(e.text)}`;
    case "call.previewed":
      return `${e.attemptId} #${e.index} ${e.name ?? ""} ${e.preview}`;
    case "message.committed":
      return `${e.attemptId} ${e.toolCalls.length} call(s)${e.text ? ` "${e.text}"` : ""}${e.usage ? ` · ${e.usage.inputTokens}→${e.usage.outputTokens} tok` : ""}`;
    case "call.queued":
      return `${e.callId} ${e.name}`;
    case "call.started":
      return `${e.callId} ${e.name}(${e.args})`;
    case "call.updated":
      return `${e.callId} ${e.progress}`;
    case "call.stop-requested":
      return e.callId;
    case "call.settled":
      return `${e.callId} ${e.name} ${e.outcome}: ${e.result.ok ? e.result.content : `${e.result.code} ${e.result.message}`}`;
    case "batch.committed":
      return `${e.turnId} ${e.calls.map((c) => `${c.name}:${c.outcome}`).join(", ")}`;
    case "retry.scheduled":
      return `${e.attemptId} ${e.mode} #${e.retry} in ${e.delayMs}ms: ${e.reason}${e.fallback ? ` (${e.fallback})` : ""}`;
    case "turn.cancel-acknowledged":
      return `${e.turnId} ${e.reason}`;
    case "turn.execution-stopped":
      return e.turnId;
    case "turn.ended":
      return `${e.turnId} ${e.status}${e.reason ? `: ${e.reason}` : ""}`;
    case "inbox.received":
      return `${e.inboxId} ${e.lane} from ${e.source}`;
    case "inbox.consumed":
      return `${e.inboxId} ${e.lane}`;
    case "permission.requested":
      return `${e.request.callId} ${e.request.tool} (risk ${e.request.risk}) ${e.request.args}`;
    case "permission.decided":
      return `${e.callId} ${e.decision.type}${e.decision.reason ? `: ${e.decision.reason}` : ""}${e.decision.feedback ? `: ${e.decision.feedback}` : ""}`;
    case "loop.detected":
      return `${e.turnId} ${e.tool} failed the same way ${e.repeats}× in a row: ${e.action}`;
    case "log.written":
      return `[${e.level}] ${e.message}`;
    case "context.measured":
      return `${e.used}${e.trusted ? "" : "~"} + ${e.reserve} reserve of ${e.window} tokens`;
    case "context.compacted":
      return `${e.mode} ${e.ok ? `${e.tokensBefore} → ${e.tokensAfter} tokens` : `failed: ${e.reason}`}`;
    case "acceptance.started":
      return `round ${e.round}: ${e.checks.join(", ") || "(no stale check)"}`;
    case "check.started":
      return `${e.name} round ${e.round} on ${e.artifactVersion}`;
    case "check.ended":
      return `${e.name} ${e.kind === "opinion" ? "opinion " : ""}${e.passed ? "passed" : "failed"} in ${e.durationMs} ms (round ${e.round})`;
    case "follow-up.sent":
      return `follow-up ${e.round}: ${e.failing.join(", ")}`;
    case "acceptance.checked":
      return `${e.acceptance} (${e.reason}, ${e.rounds} round(s), spec v${e.specVersion}) on ${e.evidence.artifactVersion ?? "?"}`;
    default:
      // Every AgentEvent type has its case above (test/agent-events.unit.test.ts checks it);
      // an event from a newer Keel is shown by its ids.
      return e.turnId ?? e.callId ?? "";
  }
}

function category(label) {
  if (label.startsWith("@")) return "x";
  return label.split(".")[0];
}

/**
 * Creates the log in `root` (the scrolling viewport), filter inputs given as elements, and
 * `detail` where a clicked record is shown in full.
 */
export function createEventLog({
  root,
  typeSelect,
  actorInput,
  textInput,
  snapshotsButton,
  count,
  detail,
}) {
  const spacer = h("div", { class: "spacer" });
  root.append(spacer);
  const pool = [];
  let records = [];
  let model;
  let limit = 0; // records[0..limit) are visible (the scrubber's position)
  let shown = []; // indices into records passing the filter
  let scanned = 0;
  let follow = true;
  let selected = -1;
  let dirty = true;
  const types = new Set();
  let filter = { type: "", actor: "", text: "" };
  // XState's snapshot records are most of the log and say what the actor tree already shows:
  // hidden unless asked for (this button, or the type filter naming them).
  let showSnapshots = false;
  let snapshots = 0; // snapshot records among records[0..scanned)

  function passes(r) {
    if (r.k === "snap" && !showSnapshots && filter.type !== "@snapshot" && filter.type !== "xstate")
      return false;
    if (filter.type) {
      const label = labelOf(r);
      if (
        filter.type === "keel"
          ? label.startsWith("@")
          : filter.type === "xstate"
            ? !label.startsWith("@")
            : label !== filter.type
      )
        return false;
    }
    if (filter.actor && !idsOf(r, model).some((id) => id?.toLowerCase().includes(filter.actor)))
      return false;
    if (filter.text && !`${labelOf(r)} ${describe(r, model)}`.toLowerCase().includes(filter.text))
      return false;
    return true;
  }

  function scan() {
    for (; scanned < limit; scanned++) {
      const r = records[scanned];
      const label = labelOf(r);
      if (!types.has(label)) {
        types.add(label);
        typeSelect.append(h("option", { value: label, text: label }));
      }
      if (r.k === "snap") snapshots++;
      if (passes(r)) shown.push(scanned);
    }
  }

  function refilter() {
    filter = {
      type: typeSelect.value,
      actor: actorInput.value.trim().toLowerCase(),
      text: textInput.value.trim().toLowerCase(),
    };
    shown = [];
    scanned = 0;
    snapshots = 0;
    dirty = true;
  }

  for (const input of [typeSelect, actorInput, textInput])
    input.addEventListener("input", refilter);
  snapshotsButton.addEventListener("click", () => {
    showSnapshots = !showSnapshots;
    snapshotsButton.setAttribute("aria-pressed", String(showSnapshots));
    refilter();
  });
  root.addEventListener("scroll", () => {
    follow = root.scrollTop + root.clientHeight >= root.scrollHeight - ROW * 1.5;
    dirty = true;
  });
  root.addEventListener("click", (event) => {
    const row = event.target.closest(".lrow");
    if (!row) return;
    selected = Number(row.dataset.index);
    setText(detail, JSON.stringify(records[selected], null, 1));
    dirty = true;
  });

  function row(i) {
    while (pool.length <= i) {
      const el = h(
        "div",
        { class: "lrow" },
        h("span", { class: "ts" }),
        h("span", { class: "ty" }),
        h("span", { class: "tx" }),
      );
      root.append(el);
      pool.push(el);
    }
    return pool[i];
  }

  return {
    /** Points the log at the record array (shared with the page) and how much of it is visible. */
    update(nextRecords, nextLimit, nextModel) {
      model = nextModel;
      if (nextRecords !== records || nextLimit < scanned) {
        records = nextRecords;
        shown = [];
        scanned = 0;
        snapshots = 0;
      }
      limit = nextLimit;
      if (scanned < limit) dirty = true;
    },
    setActorFilter(id) {
      actorInput.value = id;
      refilter();
    },
    render() {
      if (!dirty) return;
      dirty = false;
      scan();
      setText(count, `${shown.length.toLocaleString()} / ${limit.toLocaleString()}`);
      setText(
        snapshotsButton,
        showSnapshots
          ? "hide XState snapshots"
          : `show ${snapshots.toLocaleString()} XState snapshots`,
      );
      spacer.style.height = `${shown.length * ROW}px`;
      if (follow) root.scrollTop = root.scrollHeight;
      // The browser may not have clamped scrollTop to the (possibly shrunk) content yet.
      const top = Math.min(root.scrollTop, Math.max(0, shown.length * ROW - root.clientHeight));
      const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
      const last = Math.min(shown.length, Math.ceil((top + root.clientHeight) / ROW) + OVERSCAN);
      const t0 = model && Number.isFinite(model.t0) ? model.t0 : 0;
      let used = 0;
      for (let i = first; i < last; i++, used++) {
        const r = records[shown[i]];
        const el = row(used);
        el.hidden = false;
        el.style.transform = `translateY(${i * ROW}px)`;
        el.dataset.index = String(shown[i]);
        el.classList.toggle("sel", shown[i] === selected);
        const label = labelOf(r);
        setText(el.children[0], fmtStamp(r.t - t0));
        setText(el.children[1], label);
        setAttr(el.children[1], "class", `ty c-${category(label)}`);
        setText(el.children[2], describe(r, model));
      }
      for (let i = used; i < pool.length; i++) pool[i].hidden = true;
    },
  };
}
