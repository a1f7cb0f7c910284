import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { MAX_JSON_DEPTH } from "../contracts/json-limits.ts";
import type { ToolFailure } from "../contracts/tool-result.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import type { SessionStore } from "../session/store.ts";
import { StoreError } from "../session/store-error.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-hostile-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const dbPath = () => join(dir, `s${++n}.db`);

const openJson = defineTool({
  name: "take",
  description: "Takes any JSON.",
  parameters: z.object({ x: z.unknown() }),
  traits: { concurrencySafe: true },
  execute: async () => "taken",
});

async function reopened(path: string, id: string): Promise<readonly LogEntry[]> {
  const agent = createAgent({ model: scriptedModel([]), store: sqliteStore(path) });
  const session = await agent.openSession(id);
  const entries = session.entries().slice();
  await agent.close();
  await agent.store.close();
  return entries;
}

const resultOf = (entries: readonly LogEntry[], callId: string) =>
  entries.find((e) => e.type === "call_result" && e.callId === callId) as
    | Extract<LogEntry, { type: "call_result" }>
    | undefined;

describe("sessions that hostile input cannot break", () => {
  it("arguments nested 4 500 levels deep are refused as INVALID_ARGS naming the limit, and the session goes on and keeps its history", async () => {
    const deep = `${"[".repeat(4500)}${"]".repeat(4500)}`;
    const path = dbPath();
    const model = scriptedModel([
      { toolCalls: [{ id: "a", name: "take", arguments: `{"x":${deep}}` }] },
      { text: "noted" },
      { text: "second answer" },
    ]);
    const agent = createAgent({ model, tools: [openJson], store: sqliteStore(path) });
    const session = await agent.openSession("deep");
    expect(await session.prompt("first")).toMatchObject({ status: "completed" });
    const result = resultOf(session.entries(), "a")!.result as ToolFailure;
    expect(result.code).toBe("INVALID_ARGS");
    expect(result.message).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
    expect(await session.prompt("second")).toMatchObject({ status: "completed" });
    await agent.close();
    await agent.store.close();
    const entries = await reopened(path, "deep");
    const users = entries.filter((e) => e.type === "user_message").map((e) => e.text);
    expect(users).toEqual(["first", "second"]);
    expect(resultOf(entries, "a")?.result.ok).toBe(false);
  });

  it("a BigInt in a result's continuation is dropped with a note; the result and the rest of the turn are stored", async () => {
    const path = dbPath();
    const tool = defineTool({
      name: "page",
      description: "Returns a page.",
      parameters: z.object({}),
      traits: {},
      execute: async () => ({
        ok: true as const,
        content: "page 1",
        truncated: true,
        continuation: { tool: "page", args: { cursor: 10n } },
      }),
    });
    const model = scriptedModel([
      { toolCalls: [{ id: "a", name: "page", arguments: "{}" }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [tool], store: sqliteStore(path) });
    const session = await agent.openSession("big");
    expect(await session.prompt("go")).toMatchObject({ status: "completed" });
    await agent.close();
    await agent.store.close();
    const result = resultOf(await reopened(path, "big"), "a")!.result;
    expect(result.ok && result.content).toContain("page 1");
    expect(result.ok && result.content).toContain("a BigInt at continuation.args.cursor");
    expect(result.ok && result.continuation).toBeUndefined();
  });

  it("an entry the store cannot encode (a transform's BigInt, a cycle) is stored as an encodable copy that says what was replaced", async () => {
    const path = dbPath();
    const tool = defineTool({
      name: "count",
      description: "Counts.",
      parameters: z.object({
        n: z.string().transform((s) => {
          const cyclic: Record<string, unknown> = { n: BigInt(s) };
          cyclic.self = cyclic;
          return cyclic;
        }),
      }),
      traits: {},
      execute: async (args) => `counted ${String((args.n as { n: bigint }).n)}`,
    });
    const model = scriptedModel([
      { toolCalls: [{ id: "a", name: "count", arguments: '{"n":"12"}' }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [tool], store: sqliteStore(path) });
    const session = await agent.openSession("enc");
    expect(await session.prompt("go")).toMatchObject({ status: "completed" });
    await agent.close();
    await agent.store.close();
    const entries = await reopened(path, "enc");
    const started = entries.find((e) => e.type === "call_started")!;
    expect(started.encodingProblem).toContain("BigInt");
    expect((started as { args: { n: { n: unknown } } }).args.n.n).toBe("12");
    expect(resultOf(entries, "a")?.result).toEqual({ ok: true, content: "counted 12" });
  });

  it("a flush the store refuses loses nothing that was acknowledged: the entries stay queued and reach the SQLite file", async () => {
    const path = dbPath();
    const inner = sqliteStore(path);
    let refuse = 1;
    const flaky: SessionStore = {
      kind: "flaky",
      append: (id, entries) => {
        if (refuse > 0 && entries.some((e) => e.type === "call_started")) {
          refuse--;
          return Promise.reject(new StoreError("IO", "disk full (injected)"));
        }
        return inner.append(id, entries);
      },
      load: (id) => inner.load(id),
      list: () => inner.list(),
      close: () => inner.close(),
    };
    const model = scriptedModel([
      { toolCalls: [{ id: "a", name: "take", arguments: '{"x":1}' }] },
      { text: "after the failure" },
    ]);
    const agent = createAgent({ model, tools: [openJson], store: flaky });
    const session = await agent.openSession("flaky");
    const first = await session.prompt("acknowledged one");
    expect(first.status).toBe("failed");
    expect(first.reason).toContain("disk full (injected)");
    expect(await session.prompt("acknowledged two")).toMatchObject({ status: "completed" });
    await agent.close();
    await inner.close();
    const entries = await reopened(path, "flaky");
    const users = entries.filter((e) => e.type === "user_message").map((e) => e.text);
    expect(users).toEqual(["acknowledged one", "acknowledged two"]);
    expect(entries.filter((e) => e.type === "inbox")).toHaveLength(2);
    expect(entries.filter((e) => e.type === "turn_end").map((e) => e.status)).toEqual([
      "failed",
      "completed",
    ]);
  });
});

async function openPromptClose(agent: ReturnType<typeof createAgent>, id: string) {
  const session = await agent.openSession(id);
  await session.prompt("hello");
  await session.close();
  return new WeakRef(session);
}

describe("failures are bounded like output", () => {
  it.each([
    ["a thrown error with a 50 MB message", "throw"],
    ["{ ok: false, message: 50 MB }", "return"],
  ] as const)(
    "%s reaches the model within the tool's output budget, saying how much was cut",
    async (_label, how) => {
      const huge = "E".repeat(50 * 1024 * 1024);
      const tool = defineTool({
        name: "fail",
        description: "Fails loudly.",
        parameters: z.object({}),
        traits: { outputBudget: { maxBytes: 4096, overflow: "truncate" } },
        execute: async () => {
          if (how === "throw") throw new Error(huge);
          return {
            ok: false as const,
            code: "EXECUTION_FAILED" as const,
            message: huge,
            retryable: false,
          };
        },
      });
      const model = scriptedModel([
        { toolCalls: [{ id: "a", name: "fail", arguments: "{}" }] },
        { text: "noted" },
      ]);
      const agent = createAgent({ model, tools: [tool] });
      const session = await agent.openSession("loud");
      expect(await session.prompt("go")).toMatchObject({ status: "completed" });
      const toolMessage = model.requests[1].messages.find((m) => m.role === "tool");
      const text = String(toolMessage?.content);
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(4096 + 64);
      expect(text).toMatch(/first \d+ of 524\d{5} bytes shown/);
      expect(text).toContain("error message truncated");
      await agent.close();
    },
  );
});

describe("session lifecycle", () => {
  it("a closed session id opens again as a working session with its history", async () => {
    const store = memoryStore();
    const agent = createAgent({
      model: scriptedModel([{ text: "one" }, { text: "two" }]),
      store,
    });
    const first = await agent.openSession("a");
    await first.prompt("hello");
    await first.close();
    await expect(first.prompt("late")).rejects.toThrow(/session a is closed; open it again/);
    const again = await agent.openSession("a");
    expect(again).not.toBe(first);
    expect(await again.prompt("again")).toMatchObject({ status: "completed" });
    expect(again.messages().map((m) => m.content)).toEqual(["hello", "one", "again", "two"]);
    await agent.close();
  });

  it("reopening while the close is still flushing waits for it: one writer, no lost entry", async () => {
    const agent = createAgent({ model: scriptedModel([{ text: "one" }, { text: "two" }]) });
    const first = await agent.openSession("a");
    await first.prompt("hello");
    const closing = first.close();
    const again = agent.session("a");
    await closing;
    await again.ready;
    expect(await again.prompt("again")).toMatchObject({ status: "completed" });
    expect(again.entries().map((e) => e.seq)).toEqual(again.entries().map((_, i) => i + 1));
    await agent.close();
  });

  it("a closed session is released: the agent keeps no reference and it is garbage-collected", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const agent = createAgent({ model: scriptedModel([{ text: "one" }]) });
    // In a helper: a suspended async function can keep its dead locals alive in its frame.
    const ref = await openPromptClose(agent, "gone");
    for (let i = 0; i < 10 && ref.deref(); i++) {
      await new Promise((r) => setTimeout(r, 10));
      gc();
    }
    expect(ref.deref()).toBeUndefined();
    await agent.close();
  });

  it("reading a session's log before it opened throws a clear error; openSession resolves with it readable", async () => {
    const store = memoryStore();
    const writer = createAgent({ model: scriptedModel([{ text: "one" }]), store });
    await (await writer.openSession("h")).prompt("history");
    await writer.close();
    const agent = createAgent({ model: scriptedModel([]), store });
    const early = agent.session("h");
    expect(() => early.messages()).toThrow(/before the session finished opening.*openSession/);
    expect(() => early.entries()).toThrow(/await agent.openSession\("h"\)/);
    const session = await agent.openSession("h");
    expect(session).toBe(early);
    expect(session.messages().map((m) => m.content)).toEqual(["history", "one"]);
    await agent.close();
  });

  it("awaitIdle() waits for the turn of a followUp() called, not awaited, just before it", async () => {
    const model = scriptedModel([{ text: "first" }, { text: "follow-up answer", delayMs: 5 }]);
    const agent = createAgent({ model });
    const session = await agent.openSession("f");
    await session.prompt("start");
    await session.awaitIdle(); // the runner is gone: the follow-up must start a new one
    void session.followUp("and then");
    await session.awaitIdle();
    expect(model.requests).toHaveLength(2);
    expect(session.messages().at(-1)?.content).toBe("follow-up answer");
    await agent.close();
  });
});
