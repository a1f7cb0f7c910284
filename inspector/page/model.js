// The page's state: everything the views draw, folded from records in order.
// apply() is the only writer; views read the model and the `dirty` markers it leaves.

/** Tool-call states in the order a call moves through them; a call never moves back. */
export const CALL_RANK = {
  queued: 0,
  recording: 1,
  started: 2,
  stopping: 3,
  settled: 4,
  unknown: 4,
};

/** What kind of actor a machine id names (works for "keel.toolCall" and "toolCall" alike). */
export function kindOf(machine) {
  if (!machine) return "actor";
  const m = machine.toLowerCase();
  if (m.includes("toolcall") || m.includes("tool-call")) return "call";
  if (m.includes("batch")) return "batch";
  if (m === "session" || m.endsWith(".session")) return "session-chart";
  if (m.includes("coordinator")) return "coordinator";
  if (m.includes("turn")) return "turn";
  return "actor";
}

export function createModel() {
  return {
    t0: Number.POSITIVE_INFINITY,
    tLast: Number.NEGATIVE_INFINITY,
    // key → { key, id, kind, machine, state, status, parent, order, last: { from, to, event } }
    nodes: new Map(),
    bySid: new Map(), // xstate sessionId → node key
    byId: new Map(), // readable id (turnId, callId, attemptId) → node key
    sessions: new Map(), // sessionId → node key
    turns: new Map(), // turnId → { id, sessionId, t, end, status, step, marks: [] }
    attempts: new Map(), // attemptId → { id, turnId, step, t, end, status }
    calls: new Map(), // callId → { id, name, turnId, segs: [{ s, t }], state, outcome, result, args }
    retries: [], // { turnId, attemptId, retry, delayMs, readyAt, reason, mode, t, done }
    inbox: new Map(), // inboxId → { id, lane, source, t, consumedAt }
    wake: undefined, // the doorbell: undefined = not exposed, null = empty, string = scope
    tokens: { input: 0, output: 0 },
    context: null, // the last context.measured: { used, window, reserve, trusted }
    compactions: 0,
    // Acceptance, apart from run status: { status, round, checks: Map name → { passed, round, running } }
    acceptance: { status: "", round: 0, checks: new Map() },
    step: 0,
    order: 0,
    dirty: { nodes: new Set(), calls: new Set(), timeline: true, panels: true },
  };
}

function touchNode(model, node) {
  model.dirty.nodes.add(node.key);
}

function ensureNode(model, key, fields) {
  let node = model.nodes.get(key);
  if (!node) {
    node = { key, state: "", status: "active", parent: undefined, order: model.order++, ...fields };
    model.nodes.set(key, node);
    if (node.id) model.byId.set(node.id, key);
  }
  touchNode(model, node);
  return node;
}

function sessionNode(model, sessionId) {
  let key = model.sessions.get(sessionId);
  if (!key) {
    key = `s:${sessionId}`;
    model.sessions.set(sessionId, key);
    ensureNode(model, key, { id: sessionId, kind: "session", state: "open" });
  }
  return model.nodes.get(key);
}

/** The node for a readable id, created as a pseudo node under `parentKey` if no actor has it. */
function nodeFor(model, id, kind, parentKey) {
  const key = model.byId.get(id);
  if (key) {
    const node = model.nodes.get(key);
    if (node.parent === undefined && parentKey && parentKey !== key) node.parent = parentKey;
    touchNode(model, node);
    return node;
  }
  return ensureNode(model, `${kind}:${id}`, { id, kind, parent: parentKey });
}

function ensureCall(model, callId, t, fresh = false) {
  let call = model.calls.get(callId);
  if (call && fresh && CALL_RANK[call.state] === 4) {
    // A model reused a call id in a later message: keep the old call under another key.
    model.calls.delete(callId);
    model.calls.set(`${callId}~${call.order}`, { ...call, id: `${callId}~${call.order}` });
    model.dirty.calls.add(`${callId}~${call.order}`);
    call = undefined;
  }
  if (!call) {
    call = {
      id: callId,
      name: "",
      turnId: "",
      segs: [],
      state: "",
      t,
      outcome: "",
      order: model.order++,
    };
    model.calls.set(callId, call);
  }
  model.dirty.calls.add(callId);
  return call;
}

/** Moves a call forward to `state` at `t`; ignored if it would move the call backwards. */
function moveCall(model, callId, state, t) {
  if (!(state in CALL_RANK)) return;
  const call = ensureCall(model, callId, t);
  const current = call.state ? CALL_RANK[call.state] : -1;
  if (CALL_RANK[state] < current || state === call.state) return;
  if (CALL_RANK[state] === 4 && current === 4) return;
  call.state = state;
  call.segs.push({ s: state, t });
  const key = model.byId.get(callId);
  if (key) {
    const node = model.nodes.get(key);
    if (node.kind === "call" && !node.sid) node.state = state;
    touchNode(model, node);
  }
}

function applyActor(model, r) {
  const kind = kindOf(r.machine);
  const existing = model.byId.get(r.id);
  const reuse = existing && !model.nodes.get(existing).sid ? existing : undefined;
  const key = reuse ?? `a:${r.sid}`;
  model.bySid.set(r.sid, key);
  const node = ensureNode(model, key, { id: r.id, kind, machine: r.machine });
  node.sid = r.sid;
  node.machine = r.machine;
  node.kind = kind;
  node.status = "active";
  if (r.parent) node.parent = model.bySid.get(r.parent) ?? node.parent;
  model.byId.set(r.id, key);
  if (kind === "call") ensureCall(model, r.id, r.t, true);
}

/** The event an actor received last: the one its next snapshot's transition was taken on. */
function applyEv(model, r) {
  const key = model.bySid.get(r.sid);
  if (key) model.nodes.get(key).event = r.type;
}

function applySnap(model, r) {
  const key = model.bySid.get(r.sid);
  if (!key) return;
  const node = model.nodes.get(key);
  if (node.state !== r.state) {
    // The transition just taken, for the statechart: a replay names its event on the record.
    node.last = { from: node.state, to: r.state, event: r.ev ?? node.event };
  }
  node.event = undefined;
  node.state = r.state;
  node.status = r.status;
  touchNode(model, node);
  if (node.kind === "call") {
    if (r.state in CALL_RANK) moveCall(model, node.id, r.state, r.t);
  }
  if (r.wake !== undefined) {
    model.wake = r.wake;
    model.dirty.panels = true;
  }
}

function applyAgent(model, e, t) {
  const session = sessionNode(model, e.sessionId);
  switch (e.type) {
    case "turn.started": {
      model.turns.set(e.turnId, {
        id: e.turnId,
        sessionId: e.sessionId,
        t,
        status: "running",
        step: 0,
        marks: [],
        input: e.input,
      });
      const node = nodeFor(model, e.turnId, "turn", session.key);
      if (!node.sid) node.state = "running";
      break;
    }
    case "attempt.started": {
      model.attempts.set(e.attemptId, {
        id: e.attemptId,
        turnId: e.turnId,
        step: e.step,
        t,
        status: "running",
      });
      model.step = e.step;
      const turnNode = nodeFor(model, e.turnId, "turn", session.key);
      const node = nodeFor(model, e.attemptId, "attempt", turnNode.key);
      node.state = "streaming";
      for (const wait of model.retries) if (wait.turnId === e.turnId) wait.done = true;
      break;
    }
    case "attempt.ended": {
      const attempt = model.attempts.get(e.attemptId);
      if (attempt) Object.assign(attempt, { end: t, status: e.status, error: e.error });
      const key = model.byId.get(e.attemptId);
      if (key) {
        const node = model.nodes.get(key);
        node.state = e.status;
        node.status = "done";
        touchNode(model, node);
      }
      break;
    }
    case "message.committed":
      if (e.usage) {
        model.tokens.input += e.usage.inputTokens;
        model.tokens.output += e.usage.outputTokens;
      }
      break;
    case "call.queued": {
      const call = ensureCall(model, e.callId, t, true);
      Object.assign(call, { name: e.name, turnId: e.turnId });
      const turnNode = nodeFor(model, e.turnId, "turn", session.key);
      nodeFor(model, e.callId, "call", turnNode.key);
      moveCall(model, e.callId, "queued", t);
      break;
    }
    case "call.started": {
      const call = ensureCall(model, e.callId, t);
      Object.assign(call, { name: e.name, turnId: e.turnId, args: e.args });
      nodeFor(model, e.callId, "call", nodeFor(model, e.turnId, "turn", session.key).key);
      moveCall(model, e.callId, "started", t);
      break;
    }
    case "call.stop-requested":
      moveCall(model, e.callId, "stopping", t);
      break;
    case "call.settled": {
      const call = ensureCall(model, e.callId, t);
      Object.assign(call, { name: e.name, turnId: e.turnId, outcome: e.outcome, result: e.result });
      // Calls refused before they were queued (unknown tool, truncated message) appear here first.
      nodeFor(model, e.callId, "call", nodeFor(model, e.turnId, "turn", session.key).key);
      moveCall(model, e.callId, e.outcome === "unknown" ? "unknown" : "settled", t);
      break;
    }
    case "retry.scheduled":
      model.retries.push({ ...e, t, done: false });
      break;
    case "context.measured":
      model.context = { used: e.used, window: e.window, reserve: e.reserve, trusted: e.trusted };
      break;
    case "context.compacted":
      if (e.ok) model.compactions++;
      break;
    case "acceptance.started":
      model.acceptance.round = e.round;
      model.acceptance.status = "checking";
      break;
    case "check.started":
      model.acceptance.checks.set(e.name, { passed: undefined, round: e.round, running: true });
      break;
    case "check.ended":
      model.acceptance.checks.set(e.name, { passed: e.passed, round: e.round, running: false });
      break;
    case "follow-up.sent":
      model.acceptance.round = e.round;
      model.acceptance.status = `follow-up ${e.round}`;
      break;
    case "acceptance.checked":
      model.acceptance.status = e.acceptance;
      for (const c of model.acceptance.checks.values()) c.running = false;
      break;
    case "turn.cancel-acknowledged":
    case "turn.execution-stopped": {
      const turn = model.turns.get(e.turnId);
      if (turn)
        turn.marks.push({ t, label: e.type === "turn.execution-stopped" ? "stopped" : "cancel" });
      break;
    }
    case "turn.ended": {
      const turn = model.turns.get(e.turnId);
      if (turn) Object.assign(turn, { end: t, status: e.status, reason: e.reason });
      const key = model.byId.get(e.turnId);
      if (key) {
        const node = model.nodes.get(key);
        if (!node.sid) Object.assign(node, { state: e.status, status: "done" });
        node.ended = e.status;
        touchNode(model, node);
      }
      for (const wait of model.retries) if (wait.turnId === e.turnId) wait.done = true;
      break;
    }
    case "inbox.received":
      model.inbox.set(e.inboxId, { id: e.inboxId, lane: e.lane, source: e.source, t });
      break;
    case "inbox.consumed": {
      const item = model.inbox.get(e.inboxId);
      if (item) item.consumedAt = t;
      else
        model.inbox.set(e.inboxId, { id: e.inboxId, lane: e.lane, source: "?", t, consumedAt: t });
      break;
    }
    // Shown in the event log only: nothing of the tree, timeline or panels changes.
    case "attempt.queued":
    case "attempt.admitted":
    case "text.streamed":
    case "call.previewed":
    case "call.updated":
    case "batch.committed":
    case "permission.requested":
    case "permission.decided":
    case "loop.detected":
    case "log.written":
      break;
  }
  model.dirty.panels = true;
}

/** Folds one record into the model. */
export function apply(model, r) {
  if (r.t < model.t0) model.t0 = r.t;
  if (r.t > model.tLast) model.tLast = r.t;
  model.dirty.timeline = true;
  if (r.k === "actor") applyActor(model, r);
  else if (r.k === "snap") applySnap(model, r);
  else if (r.k === "ev") applyEv(model, r);
  else if (r.k === "agent") applyAgent(model, r.e, r.t);
}

/** Ids a record mentions, for the event log's actor filter. */
export function idsOf(r, model) {
  if (r.k !== "agent")
    return [r.id, r.from ? (model.nodes.get(model.bySid.get(r.from))?.id ?? "") : ""];
  const e = r.e;
  return [e.sessionId, e.turnId, e.attemptId, e.callId, e.inboxId];
}
