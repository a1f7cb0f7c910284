import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "./support/fake-openai-server.ts";
import { WIRES } from "./support/provider-wires.ts";

const child = join(import.meta.dirname, "support", "ai-sdk-crash-child.ts");
const A = { id: "call_slow_1", name: "slow", args: '{"path":"a.txt"}' };
const REASONING = {
  text: "Read it first.\n\t— then answer ✓",
  token: 'Er8BCkYICxACGAIqQK+/=\\"sig" ünï ✓==',
};

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

describe.each(WIRES)("reasoning from $kind across a crash", (wire) => {
  it("is sent back byte for byte after a SIGKILL and a reopen, next to the unknown call's result", async () => {
    server.enqueue(wire.calls([A], REASONING), wire.text("carrying on"));
    const dir = mkdtempSync(join(tmpdir(), "keel-ai-crash-"));
    const dbPath = join(dir, "keel.db");
    const proc = spawn(
      process.execPath,
      ["--import", "tsx", child, dbPath, wire.kind, server.baseURL],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    proc.stderr.on("data", (d) => {
      stderr += d;
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      proc.on("exit", (_c, sig) => resolve(sig)),
    );
    await new Promise<void>((resolve, reject) => {
      proc.stdout.on("data", (d) => {
        if (String(d).includes("READY")) resolve();
      });
      proc.on("exit", () => reject(new Error(`child exited before READY: ${stderr}`)));
    });
    proc.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");
    expect(server.requests).toHaveLength(1);

    const store = sqliteStore(dbPath);
    const never = defineTool({
      name: "slow",
      description: "Blocks.",
      parameters: z.object({ path: z.string() }),
      execute: () => {
        throw new Error("a call with a start record must not run again");
      },
    });
    // The cut turn is closed, so the next request is the new prompt's (continued turns send the
    // same history: test/durable-waits.e2e.test.ts).
    const agent = createAgent({
      model: wire.model(server.baseURL),
      store,
      tools: [never],
      recovery: "close",
    });
    const session = agent.session("crash");
    expect(await session.prompt("go on")).toMatchObject({ status: "completed", steps: 1 });
    expect(server.requests).toHaveLength(2);
    const body = server.requests[1].body;
    expect(wire.reasoningSent(body)).toEqual(wire.reasoningExpected(REASONING));
    const results = wire.toolResults(body);
    expect(results).toHaveLength(1);
    expect(results[0].ref).toBe(wire.ref(A));
    expect(results[0].content).toMatch(/unknown/i);
    await agent.close();
    await store.close();
  });
});
