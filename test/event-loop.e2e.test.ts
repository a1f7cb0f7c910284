// Invariant 16 (docs/architecture.md): no single input stalls the event loop. The loop's longest
// stall is measured (perf_hooks.monitorEventLoopDelay) while each hostile input of issue 27 is
// handled: a catastrophic regex in grep, a catastrophic glob, and a 10 MB prompt of one
// character counted with the OpenAI tokenizer. The bound, 100 ms, is the issue's; the old paths
// (behind test seams) stalled for seconds and the same probe catches them (the mutants below).
// Issue 41 adds the inputs of a model or a server: a schema's `pattern` (a client tool's, an
// MCP server's: test/mcp-hostile.e2e.test.ts runs the MCP ones against a real server), 15 MB of
// concatenated `{}` arguments, 5 000 calls in one message, and `session.open` with 400 client
// tools of 200 properties.
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { type ClientToolDeps, clientTool, clientTools } from "../cli/serve/client-tools.ts";
import { countByPieces, openaiTokenCounter } from "../providers/openai-tokens.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { globTool } from "../tools/builtin/glob.ts";
import { grepTool } from "../tools/builtin/grep.ts";
import { inlineEngine, patternRunner } from "../tools/builtin/pattern-runner.ts";
import type { Workspace } from "../tools/builtin/workspace.ts";
import { defineTool } from "../tools/define-tool.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";
import type { ToolContext } from "../tools/types.ts";

// The tokenizer the OpenAI counter uses, the same module instance (one copy of its large table
// in memory: two copies make every major GC longer than the bound on their own).
const { countTokens: wholeCount } = createRequire(import.meta.url)(
  "gpt-tokenizer/cjs/encoding/o200k_base",
) as { countTokens: (text: string) => number };

/** The bound the issue sets on any one stall of the event loop. */
const MAX_STALL_MS = 100;

/** Runs `work` and returns its result with the longest event-loop stall seen meanwhile (ms). */
async function longestStall<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  // The histogram drops its first tick (it only sets the base time): let a few pass before the
  // work starts, or a stall at its very start goes unrecorded.
  await new Promise((resolve) => setTimeout(resolve, 30));
  try {
    const result = await work();
    await new Promise((resolve) => setTimeout(resolve, 20));
    return { result, stallMs: h.max / 1e6 };
  } finally {
    h.disable();
  }
}

const root = mkdtempSync(path.join(tmpdir(), "keel-loop-"));
const createWorkspace = (dir: string): Workspace => ({
  root: dir,
  realRoot: realpathSync(dir),
  protected: [],
});
afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  await patternRunner.close();
});
const ctx = () =>
  ({
    callId: "c",
    signal: new AbortController().signal,
    onUpdate: () => {},
    log: { debug() {}, info() {}, warn() {}, error() {} },
  }) as unknown as ToolContext;

describe("no single input stalls the event loop (invariant 16)", () => {
  const ws = createWorkspace(root);
  writeFileSync(path.join(root, "input.txt"), `${"a".repeat(40)}b\nsecond line\n`);
  const long = "a".repeat(60);
  mkdirSync(path.join(root, "deep"), { recursive: true });
  writeFileSync(path.join(root, "deep", long), "x");

  it("grep with ^(a+)+$ over a line of 40 a's (12.8 s of frozen loop for 30 a's before) fails with TIMEOUT and the loop never stalls over 100 ms", async () => {
    const grep = grepTool(ws);
    // The worker's start-up is not the input's doing: start one before measuring.
    await grep.execute({ pattern: "second", path: "input.txt" }, ctx());
    const { result, stallMs } = await longestStall(() =>
      Promise.resolve(grep.execute({ pattern: "^(a+)+$", path: "input.txt" }, ctx())),
    );
    expect(result).toMatchObject({ ok: false, code: "TIMEOUT" });
    expect((result as { message: string }).message).toMatch(/backtracks catastrophically/);
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
  }, 30_000);

  it("grep's glob filter and the glob tool with *a*a*a*a*a*a*b against a 60-character name (seconds of backtracking) fail with TIMEOUT and the loop never stalls over 100 ms", async () => {
    const pattern = `*${"a*".repeat(6)}b`;
    const glob = globTool(ws);
    const grep = grepTool(ws);
    const { result, stallMs } = await longestStall(async () => [
      await glob.execute({ pattern, path: "deep" }, ctx()),
      await grep.execute({ pattern: "x", path: "deep", glob: pattern }, ctx()),
    ]);
    for (const r of result) expect(r).toMatchObject({ ok: false, code: "TIMEOUT" });
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
  }, 30_000);

  it("a 10 MB prompt of one character, counted with the OpenAI tokenizer (over 2 minutes frozen before), goes through a turn without a stall over 100 ms", async () => {
    const countTokens = openaiTokenCounter("gpt-4o")!;
    // The tokenizer's table loads on its first count (a one-time cost, not the input's).
    countTokens("warm up");
    const model = scriptedModel([{ text: "hello" }, { text: "noted" }], {
      contextWindow: 4_000_000,
      maxOutputTokens: 4096,
      countTokens,
    });
    const agent = createAgent({ model });
    const session = await agent.openSession("big");
    // A first, small turn loads every module a turn uses: the measurement is of the input.
    await session.prompt("hello");
    const prompt = "a".repeat(10 * 1024 * 1024);
    const { result, stallMs } = await longestStall(() => session.prompt(prompt));
    expect(result.status).toBe("completed");
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
    await agent.close();
  }, 60_000);

  it("a paste of runs of one letter just under 64 KiB, counted exactly, never stalls over 100 ms (issue 41: 147 ms, pieces of 512 letters cost the tokenizer tens of ms each)", async () => {
    const count = openaiTokenCounter("gpt-4o")!;
    count("warm up");
    // Letters whose runs no earlier test counted (the tokenizer caches what it counted).
    const paste = [..."qkxjvzwyQKXJVZWY"].map((c) => c.repeat(4000)).join("");
    const { result, stallMs } = await longestStall(async () => count(paste));
    expect(result).toBeGreaterThan(4000);
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
    // What bounds it: a run with no place to cut reaches the tokenizer in pieces of at most
    // 128 characters (the cost of a piece grows with its square; they were 512).
    const pieces: number[] = [];
    countByPieces(paste, (piece) => pieces.push(piece.length));
    expect(Math.max(...pieces)).toBeLessThanOrEqual(128);
  });

  it("counting by pieces gives the tokenizer's own count on ordinary text and on a run of one character", () => {
    const count = openaiTokenCounter("gpt-4o")!;
    // The oracle: the tokenizer itself, whole, on text it handles fast.
    const prose = "The quick brown fox jumps over the lazy dog.\n".repeat(200);
    expect(count(prose)).toBe(wholeCount(prose));
    const words = "lorem ipsum dolor sit amet consectetur ".repeat(300);
    expect(count(words)).toBe(wholeCount(words));
    const run = "a".repeat(2048);
    expect(count(run)).toBe(wholeCount(run));
  });
});

describe("the stall probe catches the old synchronous paths (mutants of invariant 16)", () => {
  const ws = createWorkspace(root);

  it("grep's old in-loop regex stalls the loop past the bound on ^(a+)+$ over 27 a's", async () => {
    writeFileSync(path.join(root, "short.txt"), `${"a".repeat(27)}b\n`);
    const grep = grepTool(ws, inlineEngine);
    const { stallMs } = await longestStall(() =>
      Promise.resolve(grep.execute({ pattern: "^(a+)+$", path: "short.txt" }, ctx())),
    );
    expect(stallMs).toBeGreaterThan(MAX_STALL_MS);
  }, 60_000);

  it("glob's old in-loop match stalls the loop past the bound on *a*a*a*a*a*b against 60 a's", async () => {
    const glob = globTool(ws, inlineEngine);
    // Five stars, not four: at four the backtracking took 90-300 ms, too close to the bound on a
    // loaded machine to say anything; at five it takes seconds.
    const { stallMs } = await longestStall(() =>
      Promise.resolve(glob.execute({ pattern: `*${"a*".repeat(5)}b`, path: "deep" }, ctx())),
    );
    expect(stallMs).toBeGreaterThan(MAX_STALL_MS);
  }, 60_000);

  it("counting a 16 KB run of one character whole, as before, stalls the loop past the bound (by pieces it does not)", async () => {
    wholeCount("warm up"); // loads the table outside the measurement
    // The tokenizer caches what it counted: each side gets a run no one counted before.
    const { stallMs } = await longestStall(async () => wholeCount("d".repeat(16 * 1024)));
    expect(stallMs).toBeGreaterThan(MAX_STALL_MS);
    const run = "a".repeat(16 * 1024 + 3);
    const fixed = await longestStall(async () => countByPieces(run, (t) => wholeCount(t)));
    expect(fixed.stallMs).toBeLessThan(MAX_STALL_MS);
  }, 60_000);
});

/** Client tool declarations as `session.open` carries them: `tools` of `properties` each. */
const declared = (tools: number, properties: number, pattern?: string) =>
  Array.from({ length: tools }, (_, i) => ({
    name: `tool_${i}`,
    description: "a client tool",
    parameters: {
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: properties }, (_, p) => [
          `field_${p}`,
          { type: "string", description: `field ${p}`, ...(pattern && { pattern }) },
        ]),
      ),
    },
  }));
const clientDeps = (answered: string[] = []): ClientToolDeps => ({
  execute: (params) => {
    answered.push(JSON.stringify(params.args));
    return { id: "r", result: Promise.resolve("ran") };
  },
  cancel: () => {},
  invalidReply: () => {},
  defaultTimeoutMs: 60_000,
});

describe("no model- or server-chosen input stalls the event loop (invariant 16, issue 41)", () => {
  it("a client tool's catastrophic pattern ^(a+)+$ is matched in the worker: the call is refused unsent and the loop never stalls over 100 ms (2.6 s at 27 characters before)", async () => {
    const sent: string[] = [];
    const [tool] = await clientTools(declared(1, 1, "^(a+)+$"), clientDeps(sent));
    expect(await tool.execute({ field_0: "aaaa" } as never, ctx())).toMatchObject({ ok: true });
    const { result, stallMs } = await longestStall(async () =>
      tool.execute({ field_0: `${"a".repeat(30)}b` } as never, ctx()),
    );
    expect(result).toMatchObject({ ok: false, code: "INVALID_ARGS" });
    expect(sent).toEqual(['{"field_0":"aaaa"}']);
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
  }, 30_000);

  it("15 MB of concatenated {} arguments (6.2 s before) are refused at once, naming the limit", async () => {
    const tool = defineTool({
      name: "t",
      description: "d",
      parameters: z.object({ a: z.string() }),
      execute: () => "x",
    });
    const registry = createRegistry([tool]);
    const text = "{}".repeat(7_500_000);
    const { result, stallMs } = await longestStall(async () =>
      prepareCall({ id: "c", name: "t", argumentsText: text }, registry),
    );
    expect(result).toMatchObject({ ok: false, error: { code: "INVALID_ARGS" } });
    expect(!result.ok && result.error.message).toContain(
      "the arguments are more than 16 concatenated JSON objects",
    );
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
  }, 30_000);

  // The turn's own stall is not asserted here: under vitest's module runner the scripted turn of
  // 5 000 calls runs as one chain of microtasks (1.3-2.4 s), while under plain node the same
  // turn takes 0.4 s without a stall over 10 ms (figures in the issue 41 report). What this
  // bounds is the work: 128 calls prepared and run, the rest refused unread.
  it("5 000 calls in one message: the first 128 run, the rest are refused unread, and the turn ends in seconds (15.8 s before)", async () => {
    let ran = 0;
    const echo = defineTool({
      name: "echo",
      description: "d",
      parameters: z.object({}),
      traits: { readOnly: true, concurrencySafe: true },
      execute: () => {
        ran++;
        return "x";
      },
    });
    const calls = Array.from({ length: 5000 }, (_, i) => ({
      id: `c${i}`,
      name: "echo",
      arguments: "{}",
    }));
    const model = scriptedModel([{ text: "warm" }, { toolCalls: calls }, { text: "done" }]);
    const agent = createAgent({ model, tools: [echo] });
    const session = agent.session("many");
    await session.prompt("warm up");
    const started = performance.now();
    const result = await session.prompt("go");
    const took = performance.now() - started;
    expect(result.status).toBe("completed");
    expect(ran).toBe(128);
    const refused = session
      .entries()
      .filter((e) => e.type === "call_result" && !e.result.ok && e.result.code === "INVALID_ARGS");
    expect(refused).toHaveLength(5000 - 128);
    expect(JSON.stringify(refused[0])).toContain("at most 128 are read from one message");
    expect(took).toBeLessThan(8000);
    await agent.close();
  }, 60_000);

  it("session.open with 400 client tools of 200 properties (1.7 s before) is refused at once, and 128 tools of 20 properties are read without a stall over 100 ms", async () => {
    const four = declared(400, 200);
    const many = await longestStall(() => clientTools(four, clientDeps()).catch((e) => e));
    expect(many.result).toMatchObject({ code: "INVALID_TOOL" });
    expect((many.result as Error).message).toContain("a session takes at most 128");
    expect(many.stallMs).toBeLessThan(MAX_STALL_MS);
    // The most tools a session takes (20 properties each): read with the loop's turns between.
    const specs = declared(128, 20);
    const most = await longestStall(() => clientTools(specs, clientDeps()));
    expect(most.result).toHaveLength(128);
    expect(most.stallMs).toBeLessThan(MAX_STALL_MS);
  }, 60_000);

  it("mutant: 128 tools of 50 properties read in one go, as session.open did, stall the loop past the bound", async () => {
    const specs = declared(128, 50);
    const { stallMs } = await longestStall(async () =>
      specs.map((spec, i) => clientTool(spec, i, clientDeps())),
    );
    expect(stallMs).toBeGreaterThan(MAX_STALL_MS);
  }, 60_000);
});
