// The path from `prompt()` that docs/architecture.md documents ("From prompt() to the loop"),
// checked on a real prompt: V8's precise coverage (call counts, the inspector's Profiler domain)
// over one prompt with one tool call says which functions of Keel ran, and each documented hop
// must be among them; the coordinator the old path went through must not.

import { readFileSync } from "node:fs";
import { Session as InspectorSession } from "node:inspector/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { echo } from "./session-fixtures.ts";

const root = path.resolve(import.meta.dirname, "..");

interface Coverage {
  url: string;
  functions: { functionName: string; ranges: { count: number }[] }[];
}

/** `file:function` of every function of Keel that ran at least once while `run` ran. */
async function functionsRun(run: () => Promise<void>): Promise<Set<string>> {
  const inspector = new InspectorSession();
  inspector.connect();
  try {
    await inspector.post("Profiler.enable");
    await inspector.post("Profiler.startPreciseCoverage", { callCount: true, detailed: false });
    await inspector.post("Profiler.takePreciseCoverage"); // resets the counters
    await run();
    const { result } = (await inspector.post("Profiler.takePreciseCoverage")) as {
      result: Coverage[];
    };
    const base = pathToFileURL(root).href;
    const ran = new Set<string>();
    for (const script of result) {
      if (!script.url.startsWith(base) || script.url.includes("/node_modules/")) continue;
      const file = script.url.slice(base.length + 1);
      for (const fn of script.functions) {
        if ((fn.ranges[0]?.count ?? 0) > 0) ran.add(`${file}:${fn.functionName}`);
      }
    }
    return ran;
  } finally {
    await inspector.post("Profiler.stopPreciseCoverage").catch(() => {});
    inspector.disconnect();
  }
}

describe("the path from prompt() that docs/architecture.md documents", () => {
  it("one prompt with one tool call runs each documented hop: the inputs, the session chart's host and effects, the runner, the turn run; no coordinator", async () => {
    const model = scriptedModel(
      (request) =>
        request.messages.at(-1)?.role === "tool"
          ? { text: "done" }
          : { toolCalls: [{ name: "echo", arguments: '{"text":"hi"}' }] },
      { record: "none" },
    );
    const agent = createAgent({ model, tools: [echo] });
    await (await agent.openSession("warm")).prompt("go"); // module loading and lazy paths
    const session = await agent.openSession("measured");
    const ran = await functionsRun(async () => {
      expect((await session.prompt("go")).status).toBe("completed");
      await session.awaitIdle();
    });
    await agent.close();
    // The hops in the order docs/architecture.md gives them.
    const hops = [
      "actors/session.ts:prompt",
      "actors/session-inputs.ts:prompt",
      "actors/session-runner.ts:wake",
      "actors/session-chart.ts:wake",
      "actors/session-runner.ts:prepare",
      "actors/session-runner.ts:runOne",
      "actors/session-inputs.ts:takeTurn",
      "actors/session-runner.ts:runTurn",
      "actors/turn-run.ts:start",
      "actors/session-runner.ts:cleanup",
    ];
    expect(hops.filter((hop) => !ran.has(hop))).toEqual([]);
    expect([...ran].filter((f) => /coordinator/i.test(f))).toEqual([]);
    // The document names each of these files and functions (a rename must change it too).
    const doc = readFileSync(path.join(root, "docs/architecture.md"), "utf8");
    for (const name of [
      "SessionInputs.prompt",
      "SessionRunner.wake",
      "SessionRunner.prepare",
      "SessionRunner.runOne",
      "actors/session-chart.ts",
      "actors/turn-run.ts",
    ]) {
      expect(doc, name).toContain(name);
    }
  }, 30_000);
});
