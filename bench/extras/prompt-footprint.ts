// How much of Keel one prompt with one tool call executes: the files of Keel that run and the
// function calls made in them, counted by V8's precise coverage (call counts, the inspector's
// Profiler domain), for the checkout this script runs from or for another one (a worktree of an
// older commit, to compare).
//
//   npx tsx bench/extras/prompt-footprint.ts [--repo DIR]
//
// What is counted: a second session of one agent (the first warms up every lazy path: module
// loading, dependency building) opens, runs one prompt whose model asks for one `echo` call and
// then answers, and closes; the coverage counters are reset just before it. A file counts when
// any function of it ran; calls are the sum of the call counts of Keel's functions (node_modules
// excluded). Results: bench/RESULTS.md, "Prompt footprint".
import { Session } from "node:inspector/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";

const arg = process.argv.indexOf("--repo");
const repo = path.resolve(
  arg > 0 ? process.argv[arg + 1] : path.join(import.meta.dirname, "../.."),
);

interface Keel {
  createAgent: (options: object) => {
    openSession: (id?: string) => Promise<{
      prompt: (text: string) => Promise<{ status: string }>;
      close: () => Promise<void>;
    }>;
    close: () => Promise<void>;
  };
  defineTool: (tool: object) => unknown;
  scriptedModel: (respond: (request: { messages: { role: string }[] }) => object) => unknown;
  memoryStore: () => unknown;
}

async function main(): Promise<void> {
  const keel = (await import(pathToFileURL(path.join(repo, "index.ts")).href)) as Keel;
  const echo = keel.defineTool({
    name: "echo",
    description: "Echoes its text.",
    parameters: z.object({ text: z.string() }),
    traits: {
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      cancellable: true,
      risk: "low",
    },
    execute: async ({ text }: { text: string }) => text,
  });
  const model = keel.scriptedModel((request) =>
    request.messages.at(-1)?.role === "tool"
      ? { text: "done" }
      : { toolCalls: [{ name: "echo", arguments: '{"text":"hi"}' }] },
  );
  const agent = keel.createAgent({ model, tools: [echo], store: keel.memoryStore() });
  const once = async (id: string) => {
    const session = await agent.openSession(id);
    const result = await session.prompt("go");
    if (result.status !== "completed") throw new Error(`prompt ended ${result.status}`);
    await session.close();
  };
  const inspector = new Session();
  inspector.connect();
  await inspector.post("Profiler.enable");
  await inspector.post("Profiler.startPreciseCoverage", { callCount: true, detailed: false });
  await once("warm-up");
  await inspector.post("Profiler.takePreciseCoverage"); // resets the counters
  await once("measured");
  const { result } = (await inspector.post("Profiler.takePreciseCoverage")) as {
    result: { url: string; functions: { functionName: string; ranges: { count: number }[] }[] }[];
  };
  await agent.close();
  const root = pathToFileURL(repo).href;
  const files = new Map<string, number>();
  for (const script of result) {
    const inKeel = script.url.startsWith(root) && !/\/(node_modules|bench|test)\//.test(script.url);
    if (!inKeel) continue;
    let calls = 0;
    for (const fn of script.functions) {
      // The first range is the whole function; a script's top level is not a call.
      if (fn.functionName === "" && fn.ranges.length > 0 && fn === script.functions[0]) continue;
      calls += fn.ranges[0]?.count ?? 0;
    }
    if (calls > 0) files.set(script.url.slice(root.length + 1), calls);
  }
  const total = [...files.values()].reduce((a, b) => a + b, 0);
  console.log(JSON.stringify({ repo, files: files.size, calls: total }));
  if (process.argv.includes("--list")) {
    for (const [file, calls] of [...files].sort((a, b) => b[1] - a[1])) console.log(calls, file);
  }
}

await main();
