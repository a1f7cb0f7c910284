import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";

let dataDir: string;
beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), "keel-data-"));
});
afterEach(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const results = (entries: readonly LogEntry[]) =>
  entries.filter((e) => e.type === "call_result") as Extract<LogEntry, { type: "call_result" }>[];

/** A tool whose output (`lines` numbered lines, tagged) is far over its 200-byte budget. */
const dump = defineTool({
  name: "dump",
  description: "Prints many lines.",
  parameters: z.object({ tag: z.string() }),
  traits: { readOnly: true, outputBudget: { maxBytes: 200, overflow: "spill" } },
  execute: ({ tag }) => Array.from({ length: 500 }, (_, i) => `${tag} line ${i + 1}`).join("\n"),
});
const full = (tag: string) =>
  Array.from({ length: 500 }, (_, i) => `${tag} line ${i + 1}`).join("\n");

describe("outputBudget overflow: spill, through a session", () => {
  it("an output over a spill budget is written whole under the session's data folder; the result carries its path and sha256 and the model sees a preview and where to read the rest", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "dump", arguments: '{"tag":"a"}' }] },
      // Models reuse call ids across messages: a second output of "c1" must not collide.
      { toolCalls: [{ id: "c1", name: "dump", arguments: '{"tag":"b"}' }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [dump], dataDir });
    const session = agent.session("s/1");
    expect((await session.prompt("go")).status).toBe("completed");

    const [first, second] = results(session.entries());
    for (const [entry, tag] of [
      [first, "a"],
      [second, "b"],
    ] as const) {
      const { result } = entry;
      if (!result.ok) throw new Error(`expected a success, got ${result.code}`);
      expect(result.truncated).toBe(true);
      const { continuation } = result;
      expect(continuation).toMatchObject({ tool: "read_file", sha256: sha256(full(tag)) });
      const file = continuation!.path!;
      expect(path.dirname(file)).toBe(path.join(dataDir, "sessions", "s%2F1", "spill"));
      expect(readFileSync(file, "utf8")).toBe(full(tag));
      expect(sha256(readFileSync(file, "utf8"))).toBe(continuation!.sha256);
      expect(result.content.startsWith(`${tag} line 1\n`)).toBe(true);
      expect(result.content).toContain(`saved to ${file} (sha256 ${continuation!.sha256})`);
    }
    expect(first.result.ok && first.result.continuation!.path).not.toBe(
      second.result.ok && second.result.continuation!.path,
    );
    // What the next model request carried for the first call: the preview and the file.
    const toolMessage = model.requests[1].messages.find((m) => m.role === "tool");
    expect(JSON.stringify(toolMessage)).toContain(
      first.result.ok && first.result.continuation!.path,
    );
    await agent.close();
  });

  it("when the data folder cannot be written, the output is truncated and the note says saving failed", async () => {
    const blocked = path.join(dataDir, "file");
    (await import("node:fs")).writeFileSync(blocked, "not a folder");
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "dump", arguments: '{"tag":"a"}' }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [dump], dataDir: blocked });
    const session = agent.session();
    expect((await session.prompt("go")).status).toBe("completed");
    const [{ result }] = results(session.entries());
    expect(result).toMatchObject({ ok: true, truncated: true });
    expect(result.ok && result.content).toMatch(/saving the full output failed/);
    expect(result.ok && Buffer.byteLength(result.content)).toBeLessThanOrEqual(200);
    await agent.close();
  });

  it("a dataDir that is not a non-empty string is a TypeError from createAgent", () => {
    expect(() => createAgent({ model: scriptedModel([]), dataDir: "" })).toThrow(
      /`dataDir` must be a non-empty path/,
    );
  });
});
