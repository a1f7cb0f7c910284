// The page: connects to the inspector's WebSocket, keeps every record, folds them into the
// model up to the scrubber's position and redraws on animation frames.
import { createChartView } from "./chart.js";
import { fmtStamp, h, setText } from "./dom.js";
import { createEventLog } from "./event-log.js";
import { apply, createModel } from "./model.js";
import { createInbox, createRetryWaits, renderStats } from "./panels.js";
import { createTimeline } from "./timeline.js";
import { createTree } from "./tree.js";

const MAX_RECORDS = 200_000;
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const token = params.get("token") ?? "";
const replayId = params.get("replay");
// The first load carried the token; the server also set it as an HttpOnly cookie, so the
// address bar (history, screen shares, copied links) need not show it any more.
if (params.has("token")) {
  const clean = new URL(location.href);
  clean.searchParams.delete("token");
  history.replaceState(null, "", clean.href);
}

let records = [];
let model = createModel();
let applied = 0;
let cursor = 0;
let live = true;
let mode = "connecting";
let offset = 0; // server clock − local clock
let dropped = 0;
let needsFrame = true;
let storedCount = 0; // stored sessions offered while nothing live has happened
let socket; // the open WebSocket, for the page's requests (charts)
let selectedId = ""; // the actor the chart shows (none: the latest turn)

// Clicking an actor or a call selects it: its chart is drawn and the event log filters on it.
const select = (id) => {
  selectedId = id;
  log.setActorFilter(id);
  $("actor-filter").focus();
  needsFrame = true;
};
const tree = createTree($("tree"), select);
const timeline = createTimeline($("timeline"), select);
const retries = createRetryWaits($("retry-waits"));
const inbox = createInbox($("inbox"));
const log = createEventLog({
  root: $("log"),
  typeSelect: $("type-filter"),
  actorInput: $("actor-filter"),
  textInput: $("text-filter"),
  snapshotsButton: $("show-snapshots"),
  count: $("log-count"),
  detail: $("detail"),
});
const scrubber = $("scrubber");
const chart = createChartView($("chart"), {
  title: $("chart-title"),
  request: (machine) => {
    if (socket?.readyState !== WebSocket.OPEN) return false;
    socket.send(JSON.stringify({ type: "chart", machine }));
    return true;
  },
});

/** The actor whose chart is shown: the selected one, else the latest turn, else any actor. */
function chartNode() {
  const key = selectedId ? model.byId.get(selectedId) : undefined;
  if (key) return model.nodes.get(key);
  let latest;
  for (const node of model.nodes.values()) {
    if (node.kind === "turn" && node.machine && (!latest || node.order > latest.order))
      latest = node;
  }
  if (latest) return latest;
  for (const node of model.nodes.values()) if (node.machine) return node;
  return undefined;
}

function rebuild(upTo) {
  model = createModel();
  applied = 0;
  tree.reset();
  timeline.reset();
  retries.reset();
  advance(upTo);
}

function advance(upTo) {
  for (; applied < upTo; applied++) apply(model, records[applied]);
  cursor = upTo;
}

function receive(message) {
  offset = message.now - Date.now();
  if (message.type === "hello") {
    records = message.records;
    mode = message.mode;
    setText($("mode"), mode === "replay" ? `replay ${message.sessionId ?? ""}` : "live");
    $("error").hidden = !message.error;
    setText($("error"), message.error ?? "");
    live = true;
    rebuild(0);
  } else if (message.type === "chart") {
    chart.receive(message);
  } else if (message.type === "sessions") {
    showStored(message.sessions);
  } else if (message.type === "batch") {
    dropped = message.dropped ?? dropped;
    for (const r of message.records) records.push(r);
    if (records.length > MAX_RECORDS) {
      records = records.slice(-MAX_RECORDS / 2);
      rebuild(0);
    }
  }
  needsFrame = true;
}

/** "5 minutes ago", "yesterday", "3 days ago": how long ago `ms` was, in words. */
export function ago(ms, now = Date.now()) {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return "just now";
  const m = Math.round(s / 60);
  if (m < 60) return m === 1 ? "a minute ago" : `${m} minutes ago`;
  const hours = Math.round(m / 60);
  if (hours < 24) return hours === 1 ? "an hour ago" : `${hours} hours ago`;
  const days = Math.round(hours / 24);
  if (days === 1) return "yesterday";
  return days < 30 ? `${days} days ago` : `on ${new Date(ms).toLocaleDateString()}`;
}

/** Stored sessions the page can replay (sent when the inspector has a store). */
function showStored(sessions) {
  const box = $("stored");
  box.replaceChildren(
    h("div", { class: "stored-head", text: "Earlier sessions — click one to replay it" }),
  );
  for (const s of sessions) {
    const url = new URL(location.href);
    url.searchParams.set("replay", s.sessionId);
    const date = new Date(s.updatedAt);
    box.append(
      h(
        "a",
        { href: url.href, "data-session-id": s.sessionId, title: s.sessionId },
        h("b", { class: "prompt", text: s.firstPrompt ? `“${s.firstPrompt}”` : "(no prompt yet)" }),
        h("span", {
          class: "muted when",
          text: `last active ${ago(s.updatedAt)} · ${date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })} · ${s.entries} log entries`,
        }),
      ),
    );
  }
  storedCount = sessions.length;
  needsFrame = true;
}

function connect(attempt = 0) {
  const url = new URL("/ws", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  if (token) url.searchParams.set("token", token); // else the cookie authenticates
  if (replayId) url.searchParams.set("replay", replayId);
  const ws = new WebSocket(url);
  socket = ws;
  ws.addEventListener("open", () => {
    attempt = 0;
    document.body.dataset.connection = "open";
  });
  ws.addEventListener("message", (event) => receive(JSON.parse(event.data)));
  ws.addEventListener("close", () => {
    document.body.dataset.connection = "closed";
    setText($("mode"), "disconnected · retrying");
    if (!replayId || records.length === 0)
      setTimeout(() => connect(attempt + 1), Math.min(5000, 250 * 2 ** attempt));
  });
}

scrubber.addEventListener("input", () => {
  const value = Number(scrubber.value);
  live = value >= records.length;
  if (value < applied) rebuild(value);
  else advance(value);
  needsFrame = true;
});
for (const [id, cls] of [
  ["chart-fit", "chart-fitted"],
  ["chart-wide", "chart-expanded"],
]) {
  $(id).addEventListener("click", () => {
    const on = document.body.classList.toggle(cls);
    $(id).setAttribute("aria-pressed", String(on));
    chart.refresh();
    needsFrame = true;
  });
}
$("go-live").addEventListener("click", () => {
  live = true;
  needsFrame = true;
});

function anyOpen() {
  for (const a of model.attempts.values()) if (a.end === undefined) return true;
  for (const w of model.retries) if (!w.done) return true;
  for (const c of model.calls.values())
    if (c.state && c.state !== "settled" && c.state !== "unknown") return true;
  return false;
}

function frame() {
  requestAnimationFrame(frame);
  const open = anyOpen();
  if (!needsFrame && !(live && open)) return;
  needsFrame = false;
  if (live) advance(records.length);
  const serverNow = Date.now() + offset;
  const last = cursor > 0 ? records[cursor - 1].t : model.tLast;
  const tEnd = live && open && mode === "live" ? Math.max(model.tLast, serverNow) : last;
  tree.render(model);
  chart.render(chartNode());
  timeline.render(model, tEnd);
  retries.render(model, live && mode === "live" ? serverNow : last);
  if (model.dirty.panels) inbox.render(model);
  model.dirty.panels = false;
  const { running } = renderStats($("stats"), model, records.length, dropped);
  document.body.dataset.running = String(running);
  log.update(records, cursor, model);
  log.render();
  scrubber.max = String(records.length);
  scrubber.value = String(cursor);
  document.body.dataset.live = String(live);
  $("stored").hidden = storedCount === 0 || records.length > 0 || mode === "replay";
  $("go-live").hidden = live;
  const t0 = Number.isFinite(model.t0) ? model.t0 : last;
  setText(
    $("scrub-label"),
    `${fmtStamp((last ?? 0) - (t0 ?? 0))} · ${cursor.toLocaleString()} / ${records.length.toLocaleString()}`,
  );
}

$("log").addEventListener("scroll", () => {
  needsFrame = true;
});
for (const id of ["type-filter", "actor-filter", "text-filter"])
  $(id).addEventListener("input", () => {
    needsFrame = true;
  });
$("show-snapshots").addEventListener("click", () => {
  needsFrame = true;
});
window.addEventListener("resize", () => {
  chart.refresh();
  needsFrame = true;
});
connect();
requestAnimationFrame(frame);
