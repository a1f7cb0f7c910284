// `keel replay` replays a stored session through the shipped charts and hosts with its recorded
// model answers and tool results, and reports the first entry where what it wrote differs from
// the log. The session is recorded by a real run (`keel demo --scripted`: the scripted model,
// the real built-in tools, a steer during the first batch, a 429 retried) as a child process on
// a SQLite file; the replays change nothing, then a tool's description, then a chart transition.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { replaySession } from "../actors/replay-session.ts";
import { builtinTools, createAgent, defineTool, memoryStore, scriptedModel } from "../index.ts";
import type { LogEntry } from "../session/entries.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { echo } from "./session-fixtures.ts";
import { stopsAfterFirstStepTurnMachine } from "./support/mutants/turn.mutants.ts";
import { runKeel } from "./support/run-keel.ts";

let dir = "";
let file = "";
let sessionId = "";
let entries: LogEntry[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "keel-replay-cli-"));
  file = join(dir, "keel.db");
  const demo = await runKeel(["demo", "--scripted", "--no-inspect", "--store", file], { cwd: dir });
  expect(demo.code, demo.stderr).toBe(0);
  const store = sqliteStore(file);
  try {
    [{ sessionId }] = await store.list();
    entries = await store.load(sessionId);
  } finally {
    await store.close();
  }
}, 120_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("keel replay", () => {
  it("reports no divergence on a session a real run recorded, and exits 0", async () => {
    const run = await runKeel(["replay", sessionId, "--store", file], { cwd: dir });
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe(
      `replay of ${sessionId}: OK, ${entries.length} entries, no divergence\n`,
    );
    expect(run.code).toBe(0);
  }, 60_000);

  it("reports the first divergence when a tool's description changed: the turn's record of what the model was offered, exit 5", async () => {
    const tools = join(dir, "tools.mjs");
    const index = join(import.meta.dirname, "..", "index.ts");
    writeFileSync(
      tools,
      `import { builtinTools } from ${JSON.stringify(index)};
export default ({ workspace }) =>
  builtinTools({ root: workspace }).map((t) =>
    t.name === "grep" ? { ...t, description: t.description + " Prefer it to reading files." } : t,
  );
`,
    );
    const run = await runKeel(["replay", sessionId, "--store", file, "--tools", tools], {
      cwd: dir,
    });
    const start = entries.find((e) => e.type === "turn_start")!;
    const recorded = start.type === "turn_start" ? start.offered?.grep : undefined;
    expect(recorded).toMatch(/^[0-9a-f]{16}$/);
    const lines = run.stdout.split("\n");
    expect(lines[0]).toBe(
      `replay of ${sessionId}: diverges at entry ${start.seq} (turn_start) at offered.grep`,
    );
    expect(lines[1]).toBe(`  expected: ${JSON.stringify(recorded)}`);
    expect(lines[2]).toMatch(/^ {2}got: {6}"[0-9a-f]{16}"$/);
    expect(lines[2]).not.toContain(recorded!);
    expect(run.code).toBe(5);
  }, 60_000);

  it("reports the first divergence when the instructions changed: the settings entry the first turn writes", async () => {
    const prompt = join(dir, "instructions.txt");
    writeFileSync(prompt, "You are a careful agent.");
    const run = await runKeel(
      ["replay", sessionId, "--store", file, "--instructions", prompt, "--json"],
      {
        cwd: dir,
      },
    );
    const settings = entries.find((e) => e.type === "settings")!;
    expect(JSON.parse(run.stdout)).toEqual({
      sessionId,
      entries: entries.length,
      divergence: {
        seq: settings.seq,
        type: "settings",
        path: "settings.instructions",
        expected: expect.stringContaining("You are a coding agent"),
        got: JSON.stringify("You are a careful agent."),
      },
    });
    expect(run.code).toBe(5);
  }, 60_000);

  it("reports the first divergence when a chart transition changed: a turn chart that ends after its first step", async () => {
    const report = await replaySession({
      sessionId,
      entries,
      tools: builtinTools({ root: dir }),
      agent: { turnMachine: stopsAfterFirstStepTurnMachine },
    });
    // The log's first step ends with its batch's last result; the mutant ends the turn there.
    const firstAnswer = entries.findIndex((e) => e.type === "assistant_message");
    const nextAttempt = entries.findIndex((e, i) => i > firstAnswer && e.type === "attempt_start");
    const lastResult = entries.slice(0, nextAttempt).findLastIndex((e) => e.type === "call_result");
    const after = entries[lastResult + 1];
    expect(report.divergence).toMatchObject({ seq: after.seq, type: after.type, path: "" });
    expect(report.divergence?.got).toContain('"type":"turn_end"');
    // The same chart, unchanged, agrees with the log.
    const again = await replaySession({ sessionId, entries, tools: builtinTools({ root: dir }) });
    expect(again.divergence).toBeUndefined();
    expect(again.entries).toHaveLength(entries.length);
  }, 60_000);

  it("says which session it does not know (exit 4) and why a store cannot be opened (exit 3)", async () => {
    const unknown = await runKeel(["replay", "s_nope", "--store", file], { cwd: dir });
    expect(unknown.code).toBe(4);
    expect(unknown.stderr).toContain('no session "s_nope"');
    const broken = join(dir, "broken.db");
    writeFileSync(
      broken,
      "this is not a SQLite database, only text long enough to be read".repeat(20),
    );
    const bad = await runKeel(["replay", sessionId, "--store", broken], { cwd: dir });
    expect(bad.code).toBe(3);
    expect(bad.stderr.split("\n").filter(Boolean)).toHaveLength(1);
    expect(bad.stdout).toBe("");
  }, 60_000);
});

describe("replaySession", () => {
  it("replays an automatic compaction with the summary the log recorded, given the model's window", async () => {
    const store = memoryStore();
    const big = "x".repeat(1200);
    const summaryOr = (text: string) => (request: { attemptId: string }) =>
      request.attemptId.startsWith("compaction") ? { text: "SUMMARY of earlier work" } : { text };
    const model = scriptedModel(
      [
        { toolCalls: [{ id: "c1", name: "echo", arguments: JSON.stringify({ text: big }) }] },
        { toolCalls: [{ id: "c2", name: "echo", arguments: JSON.stringify({ text: big }) }] },
        summaryOr("done"),
        summaryOr("done"),
      ],
      { contextWindow: 2000 },
    );
    const context = { compactAt: 0.5, keepRecentTokens: 100 };
    const agent = createAgent({ model, tools: [echo], store, context });
    expect((await agent.session("s_compact").prompt("go")).status).toBe("completed");
    await agent.close();
    const log = await store.load("s_compact");
    const compaction = log.find((e) => e.type === "compaction")!;
    expect(compaction).toBeDefined();
    const same = await replaySession({
      sessionId: "s_compact",
      entries: log,
      tools: [echo],
      agent: { context },
      model: { contextWindow: 2000 },
    });
    expect(same.divergence, JSON.stringify(same.divergence)).toBeUndefined();
    // Without the window the runtime never compacts: the replay asks for the next answer instead.
    const windowless = await replaySession({
      sessionId: "s_compact",
      entries: log,
      tools: [echo],
      agent: { context },
    });
    expect(windowless.divergence).toMatchObject({ seq: compaction.seq, type: "compaction" });
  }, 30_000);
});

describe("replaySession with permissions", () => {
  it("answers each permission request with the reply the log recorded, and diverges when the rules changed", async () => {
    const store = memoryStore();
    const risky = defineTool({
      name: "risky",
      description: "Does something risky.",
      parameters: z.object({ n: z.number() }),
      traits: { concurrencySafe: false, risk: "high" },
      execute: ({ n }) => `did ${n}`,
    });
    const model = scriptedModel([
      { toolCalls: [{ id: "r1", name: "risky", arguments: '{"n":1}' }] },
      { toolCalls: [{ id: "r2", name: "risky", arguments: '{"n":2}' }] },
      { text: "done" },
    ]);
    const replies = [
      { type: "allow_once" as const },
      { type: "deny_with_feedback" as const, feedback: "not twice" },
    ];
    const agent = createAgent({
      model,
      tools: [risky],
      store,
      permissions: { ask: async () => replies.shift()! },
    });
    expect((await agent.session("s_perm").prompt("go")).status).toBe("completed");
    await agent.close();
    const log = await store.load("s_perm");
    const decisions = log.flatMap((e) =>
      e.type === "permission_decision" ? [e.decision.type] : [],
    );
    expect(decisions).toEqual(["allow", "corrected"]);
    const same = await replaySession({
      sessionId: "s_perm",
      entries: log,
      tools: [risky],
      agent: { permissions: {} },
    });
    expect(same.divergence, JSON.stringify(same.divergence)).toBeUndefined();
    // A rule that now allows the tool without asking: the request the log recorded (asked before
    // its decision) is never written.
    const allowed = await replaySession({
      sessionId: "s_perm",
      entries: log,
      tools: [risky],
      agent: { permissions: { rules: [{ tool: "risky", action: "allow" }] } },
    });
    const first = log.find((e) => e.type === "permission_request")!;
    expect(allowed.divergence).toMatchObject({ seq: first.seq, type: "permission_request" });
  }, 30_000);
});

describe("inspector/replay.ts", () => {
  it("holds no state name and no event name of the charts, and no XState internal event", async () => {
    const source = readFileSync(join(import.meta.dirname, "..", "inspector", "replay.ts"), "utf8");
    const literals = new Set(
      [...source.matchAll(/(["'`])((?:(?!\1)[^\\\n])*)\1/g)].map((m) => m[2]),
    );
    const names = await chartNames();
    expect(names.size).toBeGreaterThan(30);
    const found = [...literals].filter((text) => names.has(text) || text.includes("xstate."));
    expect(found).toEqual([]);
    // The check sees a name when there is one.
    const planted = `${source}\nconst s = "running.waiting";`;
    const plantedLiterals = [...planted.matchAll(/(["'`])((?:(?!\1)[^\\\n])*)\1/g)].map(
      (m) => m[2],
    );
    expect(plantedLiterals.some((t) => names.has(t))).toBe(true);
  });
});

/**
 * Every state (by key and by dotted path) and every event type of the machines under machines/,
 * read from the machines themselves: whatever charts this Keel ships.
 */
async function chartNames(): Promise<Set<string>> {
  const { readdirSync } = await import("node:fs");
  const folder = join(import.meta.dirname, "..", "machines");
  const names = new Set<string>();
  for (const name of readdirSync(folder).filter((f) => f.endsWith(".machine.ts"))) {
    const mod = (await import(join(folder, name))) as Record<string, unknown>;
    for (const value of Object.values(mod)) {
      const root = (value as { root?: StateNodeLike } | null)?.root;
      if (root && typeof root === "object" && "states" in root) collect(root, "", names);
    }
  }
  return names;
}

interface StateNodeLike {
  key: string;
  states: Record<string, StateNodeLike>;
  on?: Record<string, unknown>;
  ownEvents?: readonly string[];
}

function collect(node: StateNodeLike, path: string, names: Set<string>) {
  for (const event of node.ownEvents ?? []) names.add(event);
  for (const [key, child] of Object.entries(node.states)) {
    const inner = path ? `${path}.${key}` : key;
    names.add(key);
    names.add(inner);
    collect(child, inner, names);
  }
}
