// A rejection is final (invariant 15 of docs/architecture.md): a prompt whose input the store
// refused (a real SQLite file locked by another connection past busyTimeoutMs) rejects, and its
// turn never runs, not even once the store recovers and the next input is written; a retry runs
// once. And a sink that throws fails nothing: an inspect sink throwing on `call.settled` leaves the
// turn whose tool ran completed.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { InspectSink } from "../actors/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function deployTool(deploys: string[]) {
  return defineTool({
    name: "deploy",
    description: "Deploys.",
    parameters: z.object({ what: z.string() }),
    traits: { risk: "low" },
    execute: ({ what }) => {
      deploys.push(what);
      return "deployed";
    },
  });
}

describe("a refused input never runs", () => {
  it("a prompt refused by a locked SQLite store rejects; after the lock is gone its turn never runs, and the retry runs once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-refusal-"));
    dirs.push(dir);
    const file = join(dir, "keel.db");
    const store = sqliteStore(file, { busyTimeoutMs: 100 });
    const deploys: string[] = [];
    // Every turn after the warm-up deploys: a refused input that ran would deploy twice.
    const model = scriptedModel([
      { text: "warm" },
      { toolCalls: [{ id: "c1", name: "deploy", arguments: '{"what":"v2"}' }] },
      { text: "deployed v2" },
      { toolCalls: [{ id: "c2", name: "deploy", arguments: '{"what":"v2"}' }] },
      { text: "deployed v2 again" },
    ]);
    const agent = createAgent({ model, store, tools: [deployTool(deploys)], lease: false });
    const session = await agent.openSession("s");
    await session.prompt("warm up"); // the first turn creates the session's rows
    const before = model.requests.length;

    const holder = new Database(file);
    holder.exec("BEGIN IMMEDIATE");
    let refused: unknown;
    try {
      await session.prompt("deploy v2 (first try)");
    } catch (error) {
      refused = error;
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
    expect(String(refused)).toMatch(/locked|busy/i);

    const retry = await session.prompt("deploy v2 (retry)");
    await session.awaitIdle();
    expect(retry.status).toBe("completed");
    const asked = JSON.stringify(model.requests.slice(before));
    expect(asked).toContain("deploy v2 (retry)");
    expect(asked).not.toContain("first try");
    expect(deploys).toEqual(["v2"]);
    const texts = session
      .entries()
      .filter((e) => e.type === "inbox")
      .map((e) => (e as { body: string }).body);
    expect(texts).not.toContain("deploy v2 (first try)");
    await agent.close();
    // Nothing of it in the store either.
    const reread = sqliteStore(file);
    const stored = JSON.stringify(await reread.load("s"));
    expect(stored).not.toContain("first try");
    await reread.close();
  });
});

describe("sinks and listeners never fail a turn", () => {
  it("an inspect sink that throws on call.settled (and a listener that throws) leaves the turn completed", async () => {
    const deploys: string[] = [];
    const sink: InspectSink = {
      observe() {},
      publish(event) {
        if (event.type === "call.settled") throw new Error("the sink broke");
      },
    };
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "deploy", arguments: '{"what":"v3"}' }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [deployTool(deploys)], inspect: sink });
    const session = await agent.openSession("sink");
    session.subscribe((event) => {
      if (event.type === "call.settled") throw new Error("the listener broke");
    });
    const result = await session.prompt("deploy v3");
    expect(result.status).toBe("completed");
    expect(result.text).toBe("done");
    expect(deploys).toEqual(["v3"]);
    await agent.close();
  });

  it("an inspect sink whose observe throws (every XState event) fails nothing either", async () => {
    const sink: InspectSink = {
      observe() {
        throw new Error("observe broke");
      },
      publish() {},
    };
    const agent = createAgent({ model: scriptedModel([{ text: "hi" }]), inspect: sink });
    const result = await (await agent.openSession("obs")).prompt("hello");
    expect(result).toMatchObject({ status: "completed", text: "hi" });
    await agent.close();
  });
});
