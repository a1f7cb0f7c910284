import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import type { AgentOptions } from "../actors/agent-options.ts";
import { replayRecords } from "../inspector/replay.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import type { LeaseStore, SessionStore } from "../session/store.ts";
import { postgresStore } from "../session/stores/postgres-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { readLines } from "./support/crash-tools.ts";
import { durableTools } from "./support/durable-tools.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

// Durable waits and continued turns across real processes killed with SIGKILL
// (docs/crashes.md; invariants 19 and 20 of docs/architecture.md), on SQLite and PostgreSQL.

// biome-ignore lint/correctness/useHookAtTopLevel: a vitest fixture named like a hook, not a React hook
const db = usePostgres();
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
});

type Shared = SessionStore & LeaseStore;
interface Backend {
  /** The store's address for a child, and a store on it for this process. */
  where(): string;
  schema?: string;
  open(): Promise<Shared>;
}

function sqliteBackend(dir: string): Backend {
  const path = join(dir, "keel.db");
  return { where: () => path, open: async () => sqliteStore(path) };
}

function postgresBackend(): Backend {
  const schema = freshSchema("durable");
  return {
    where: () => db.url(),
    schema,
    open: async () => {
      const store = await postgresStore(db.url(), { schema, max: 4 });
      db.stores.push(store);
      return store;
    },
  };
}

/** A child running `scenario` (test/support/durable-child.ts), with its JSON lines. */
function spawnChild(backend: Backend, dir: string, scenario: string, run = 1) {
  const args = [
    backend.where(),
    dir,
    scenario,
    String(run),
    ...(backend.schema ? [backend.schema] : []),
  ];
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "support", "durable-child.ts"), ...args],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  children.push(child);
  const lines: Record<string, unknown>[] = [];
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    for (let nl = out.indexOf("\n"); nl !== -1; nl = out.indexOf("\n")) {
      lines.push(JSON.parse(out.slice(0, nl)));
      out = out.slice(nl + 1);
    }
  });
  child.stderr.on("data", (d) => {
    err += d;
  });
  const exited = new Promise<NodeJS.Signals | number | null>((r) =>
    child.on("exit", (code, signal) => r(signal ?? code)),
  );
  const line = async (ev: string) => {
    for (let i = 0; i < 3000; i++) {
      const found = lines.find((l) => l.ev === ev);
      if (found) return found;
      if (child.exitCode !== null || child.signalCode !== null) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`child ${scenario}: no ${ev} (exit ${child.exitCode}); stderr: ${err}`);
  };
  const kill = async () => {
    child.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");
  };
  return { child, line, exited, kill };
}

/** An agent of this process on the shared store: mark needs an approval no one here gives. */
function agentHere(store: Shared, dir: string, options: Partial<AgentOptions> = {}) {
  const model = scriptedModel([{ text: "done after the crash" }]);
  const agent = createAgent({
    model,
    store,
    tools: durableTools({ dir, afterEffect: async () => {} }),
    lease: { ttlMs: 3000, pollMs: 50 },
    permissions: { ask: () => new Promise(() => {}) },
    ...options,
  });
  return { agent, model };
}

const turnEnds = (entries: readonly LogEntry[]) =>
  entries.filter((e): e is EntryOf<"turn_end"> => e.type === "turn_end");
const resultOf = (entries: readonly LogEntry[], callId: string) =>
  entries.find((e): e is EntryOf<"call_result"> => e.type === "call_result" && e.callId === callId);

const backends: [string, (dir: string) => Backend, boolean][] = [
  ["SQLite", sqliteBackend, true],
  ["PostgreSQL", () => postgresBackend(), db.mode.run],
];

describe.each(backends)("%s: durable waits across processes", (_name, make, runs) => {
  it.skipIf(!runs)(
    "a process waiting on an approval is killed; the next lists the same request, answers it, the tool runs once and the turn completes",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
      const backend = make(dir);
      const owner = spawnChild(backend, dir, "approval");
      await owner.line("ready");
      await owner.kill();
      const store = await backend.open();
      const { agent, model } = agentHere(store, dir);
      const session = await agent.openSession("durable");
      expect(session.role).toBe("owner");
      const pending = await session.pendingPermissions();
      expect(pending).toMatchObject([{ requestId: "m1.perm", callId: "m1", tool: "mark" }]);
      expect(await session.replyPermission("m1.perm", { type: "allow_once" })).toEqual({
        ok: true,
      });
      await session.awaitIdle();
      const entries = await store.load("durable");
      expect(readLines(join(dir, "marker.log"))).toEqual(["once"]);
      expect(resultOf(entries, "m1")).toMatchObject({ outcome: "completed" });
      const [end] = turnEnds(entries);
      expect(end).toMatchObject({ status: "completed" });
      expect(entries.find((e) => e.type === "turn_start")).toMatchObject({ turnId: end.turnId });
      // The model was asked again in the same turn, with the tool's result.
      expect(model.requests).toHaveLength(1);
      expect(JSON.stringify(model.requests[0].messages)).toContain("marked once");
      expect(await session.replyPermission("m1.perm", { type: "deny" })).toMatchObject({
        ok: false,
        code: "ALREADY_DECIDED",
      });
      await agent.closeSession("durable");
    },
  );

  it.skipIf(!runs)(
    "while the owner waits, a follower in another process lists the request and answers it; the owner's tool runs once and its turn completes",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
      const backend = make(dir);
      const owner = spawnChild(backend, dir, "approval");
      await owner.line("ready");
      const store = await backend.open();
      const { agent } = agentHere(store, dir);
      const follower = await agent.openSession("durable");
      expect(follower.role).toBe("follower");
      expect(await follower.pendingPermissions()).toMatchObject([{ requestId: "m1.perm" }]);
      expect(await follower.replyPermission("m1.perm", { type: "allow_once" })).toEqual({
        ok: true,
      });
      expect(await owner.line("result")).toMatchObject({
        result: { status: "completed", text: "marked after approval" },
      });
      expect(await owner.exited).toBe(0);
      expect(readLines(join(dir, "marker.log"))).toEqual(["once"]);
      const decision = (await store.load("durable")).find((e) => e.type === "permission_decision");
      expect(decision).toMatchObject({ source: { type: "reply", reply: "allow_once" } });
      await agent.closeSession("durable");
    },
  );

  it.skipIf(!runs)(
    "two processes answer at once: one answer wins, the other is refused ALREADY_DECIDED, the tool runs once",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
      const backend = make(dir);
      const owner = spawnChild(backend, dir, "approval");
      await owner.line("ready");
      const other = spawnChild(backend, dir, "answer");
      await other.line("ready");
      const store = await backend.open();
      const { agent } = agentHere(store, dir);
      const here = await agent.openSession("durable");
      expect(here.role).toBe("follower");
      writeFileSync(join(dir, "go"), "");
      const mine = await here.replyPermission("m1.perm", { type: "allow_once" });
      const theirs = (await other.line("answered")).answer as { ok: boolean; code?: string };
      const outcomes = [mine, theirs].map((a) => (a.ok ? "ok" : (a as { code: string }).code));
      expect(outcomes.sort()).toEqual(["ALREADY_DECIDED", "ok"]);
      expect(await owner.line("result")).toMatchObject({ result: { status: "completed" } });
      expect(readLines(join(dir, "marker.log"))).toEqual(["once"]);
      const decisions = (await store.load("durable")).filter(
        (e) => e.type === "permission_decision",
      );
      expect(decisions).toHaveLength(1);
      await agent.closeSession("durable");
    },
  );

  it.skipIf(!runs)(
    "a process killed mid-turn: the next one, with no new prompt, continues the turn to completed; the cut call is unknown and ran once; the model saw the first step's result",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
      const backend = make(dir);
      const first = spawnChild(backend, dir, "mid-turn");
      await first.line("ready");
      await first.kill();
      const store = await backend.open();
      const { agent, model } = agentHere(store, dir, {
        permissions: { rules: [{ tool: "*", action: "allow" }] },
      });
      const session = await agent.openSession("durable");
      await session.awaitIdle();
      const entries = await store.load("durable");
      expect(resultOf(entries, "m1")).toMatchObject({
        outcome: "unknown",
        result: { code: "OUTCOME_UNKNOWN" },
      });
      expect(readLines(join(dir, "marker.log"))).toEqual(["once"]);
      const ends = turnEnds(entries);
      expect(ends).toHaveLength(1);
      expect(ends[0]).toMatchObject({ status: "completed" });
      expect(entries.filter((e) => e.type === "user_message")).toHaveLength(1);
      expect(entries.find((e) => e.type === "turn_continued")).toMatchObject({
        turnId: ends[0].turnId,
        continuation: 1,
      });
      const seen = JSON.stringify(model.requests[0].messages);
      expect(seen).toContain("the first step saw a red door");
      expect(seen).toContain("OUTCOME_UNKNOWN");
      expect(session.messages().at(-1)).toMatchObject({ content: "done after the crash" });
      await agent.closeSession("durable");
    },
  );

  it.skipIf(!runs)(
    "a turn cut again and again is closed failed with CRASH_LOOP after maxContinuations",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
      const backend = make(dir);
      for (const run of [1, 2]) {
        const child = spawnChild(backend, dir, "loop", run);
        await child.line("ready");
        await child.kill();
      }
      expect(readLines(join(dir, "marker.log"))).toEqual(["run 1", "run 2"]);
      const store = await backend.open();
      const { agent, model } = agentHere(store, dir, {
        recovery: { maxContinuations: 1 },
        permissions: { rules: [{ tool: "*", action: "allow" }] },
      });
      const session = await agent.openSession("durable");
      await session.awaitIdle();
      const ends = turnEnds(await store.load("durable"));
      expect(ends).toHaveLength(1);
      expect(ends[0]).toMatchObject({ status: "failed", code: "CRASH_LOOP" });
      expect(model.requests).toHaveLength(0);
      expect(readLines(join(dir, "marker.log"))).toEqual(["run 1", "run 2"]);
      await agent.closeSession("durable");
    },
  );
});

/** Runs `keel <args>` (cli/bin.js) to its end. */
function keel(args: string[]) {
  const bin = join(import.meta.dirname, "..", "cli", "bin.js");
  const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += d;
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("exit", (code) => resolve({ code, stdout, stderr })),
  );
}

describe("keel approve / keel deny", () => {
  it("SQLite: while no process holds the session, keel deny --feedback decides the request; the next process continues the turn with the feedback, the tool never runs, and a second answer is refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
    const backend = sqliteBackend(dir);
    const owner = spawnChild(backend, dir, "approval");
    await owner.line("ready");
    await owner.kill();
    const denied = await keel([
      "deny",
      "durable",
      "--feedback",
      "not today",
      "--store",
      backend.where(),
    ]);
    expect(denied).toMatchObject({ code: 0, stdout: "denied m1.perm in session durable\n" });
    const again = await keel(["approve", "durable", "m1.perm", "--store", backend.where()]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(
      /m1\.perm of session durable was decided already by an earlier answer \(deny_with_feedback\)/,
    );
    const store = await backend.open();
    const { agent, model } = agentHere(store, dir);
    const session = await agent.openSession("durable");
    await session.awaitIdle();
    const entries = await store.load("durable");
    expect(turnEnds(entries)).toMatchObject([{ status: "completed" }]);
    expect(resultOf(entries, "m1")).toMatchObject({
      outcome: "not_executed",
      result: { code: "DENIED" },
    });
    expect(JSON.stringify(model.requests[0].messages)).toContain(
      "the user declined this call: not today",
    );
    expect(readLines(join(dir, "marker.log"))).toEqual([]);
    await agent.closeSession("durable");
  });
});

describe("durable waits in one process", () => {
  it("a request that no one answers by its deadline is denied with feedback that says so, and the model sees it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
    const store = sqliteStore(join(dir, "keel.db"));
    const model = scriptedModel([
      { toolCalls: [{ id: "m1", name: "mark", arguments: '{"label":"late"}' }] },
      { text: "ok, it was not approved" },
    ]);
    const session = createAgent({
      model,
      store,
      tools: durableTools({ dir, afterEffect: async () => {} }),
      permissions: { ask: () => new Promise(() => {}), timeoutMs: 100 },
    }).session("deadline");
    expect(await session.prompt("go")).toMatchObject({ status: "completed" });
    const request = session.entries().find((e) => e.type === "permission_request");
    expect(request).toMatchObject({ requestId: "m1.perm", deadlineAt: expect.any(Number) });
    expect(session.entries().find((e) => e.type === "permission_decision")).toMatchObject({
      source: { type: "expired" },
      decision: { type: "corrected" },
    });
    expect(JSON.stringify(model.requests[1].messages)).toMatch(
      /no one answered the request to run mark in time/,
    );
    expect(readLines(join(dir, "marker.log"))).toEqual([]);
    // The log holds the request and its expiry (the inspector shows both as it replays the
    // session through the charts with its tools and rules: test/replay.e2e.test.ts).
    const types = session.entries().map((e) => e.type);
    expect(types).toContain("permission_request");
    expect(
      session
        .entries()
        .some((e) => e.type === "permission_decision" && e.source.type === "expired"),
    ).toBe(true);
    await store.close();
  });

  it("allow_always holds for the session in the next process: the tool runs without asking", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
    const path = join(dir, "keel.db");
    const call = (id: string) => ({
      toolCalls: [{ id, name: "mark", arguments: `{"label":"${id}"}` }],
    });
    const first = createAgent({
      model: scriptedModel([call("a1"), { text: "one" }]),
      store: sqliteStore(path),
      tools: durableTools({ dir, afterEffect: async () => {} }),
      permissions: { ask: async () => ({ type: "allow_always" }) },
    });
    expect(await (await first.openSession("always")).prompt("go")).toMatchObject({
      status: "completed",
    });
    await first.closeSession("always");
    let asked = 0;
    const second = createAgent({
      model: scriptedModel([call("a2"), { text: "two" }]),
      store: sqliteStore(path),
      tools: durableTools({ dir, afterEffect: async () => {} }),
      permissions: {
        ask: async () => {
          asked++;
          return { type: "deny" };
        },
      },
    });
    const again = await second.openSession("always");
    expect(await again.prompt("go again")).toMatchObject({ status: "completed" });
    expect(asked).toBe(0);
    expect(readLines(join(dir, "marker.log"))).toEqual(["a1", "a2"]);
    await second.closeSession("always");
  });
});
