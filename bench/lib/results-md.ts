/** The whole bench/RESULTS.md document: machine, method, the five sections, raw samples. */
import {
  renderExtra,
  renderFlatness,
  renderMachine,
  renderSessions,
  renderStepSection,
} from "./report.ts";
import type { BenchResults } from "./results.ts";
import { formatUs } from "./stats.ts";

/** How Keel was imported: its built package (the default), or what `KEEL_ENTRY` named. */
function keelEntryBullet(r: BenchResults): string {
  const e = r.machine.keelEntry;
  if (e.built) {
    return `- **Keel as its built package.** Keel is measured as its built package, \`${e.shown}\`: the esbuild bundle of \`index.ts\` that \`npm ci\` builds and an embedder's \`import "keel"\` loads, as the peers are measured as the compiled JS they ship; \`bench/run.ts\` rebuilds it from the current sources first. (The harnesses run under tsx, which leaves \`.js\` as it is; Keel's \`.ts\` sources through tsx would pay esbuild's keepNames \`__name(…)\` call at every function creation. \`KEEL_ENTRY=index.ts\` measures them.)`;
  }
  const tsx = e.shown.endsWith(".ts")
    ? " Through tsx, every function creation in Keel pays esbuild's keepNames `__name(…)` call, which its built package does not."
    : "";
  return `- **Keel not as its built package.** This run measured Keel from \`${e.shown}\` (\`KEEL_ENTRY\`), not its built package \`dist/index.js\` that \`npm ci\` builds and an embedder imports; the peers are measured as the compiled JS they ship.${tsx}`;
}

function method(r: BenchResults): string {
  const s = r.settings;
  return [
    "- **Workload.** One prompt, then N steps: each model call returns one (or 8) calls of a trivial tool (`touch`, one string argument, returns `ok`), the runtime runs them and feeds the results back; after N steps the model answers with text. µs per step = wall time of the whole prompt ÷ N.",
    '- **Fakes.** Every fake model is O(1) per call and keeps no call log: Keel `scriptedModel(stepFn, { record: "none" })`; pi-agent-core a `streamFn` pushing start/toolcall_*/done into an `AssistantMessageEventStream`; Vercel `ai` `MockLanguageModelV3` with `doGenerateCalls` cleared on every call; `@openai/agents` a `Model` whose `getResponse` returns `function_call` items; LangGraph.js a `BaseChatModel` subclass whose `_generate` returns an `AIMessage` with `tool_calls`; the bare loop an async generator of Keel\'s `ModelEvent`s.',
    "- **Fastest reasonable configuration.** No listeners, no logging, tracing/telemetry off, parallel tool execution; Vercel, `@openai/agents` and LangGraph.js run non-streamed (`generateText`, `Runner.run`, `graph.invoke`), Keel and pi-agent-core stream (they have no other path). Each runtime gets a fresh agent per prompt.",
    '- **The durable peer.** LangGraph.js is the one peer that persists every step, as Keel does: its ReAct graph (`StateGraph(MessagesAnnotation)`, a model node, the prebuilt `ToolNode`, `toolsCondition`) compiled with a checkpointer, each prompt on a new `thread_id`, checkpointing every superstep (durability "async", its default). `MemorySaver` (a new one per prompt) is compared with Keel\'s memory store, `SqliteSaver` on a temporary file (WAL, synchronous NORMAL, one for the process) with Keel\'s `sqliteStore(…, { durability: "process" })` (also WAL, synchronous NORMAL): the Keel ÷ LangGraph tables.',
    "- **One process per runtime and setting.** `bench/run.ts` spawns `node --expose-gc --import tsx bench/runtimes/<name>.ts` for each runtime × calls-per-step and collects one JSON line. `@openai/agents` switches on AsyncLocalStorage at first use, which slows every `await` in the process (≈ 85 → 137 ns a hop on Node 20): in a shared process it would tax every runtime measured after it.",
    keelEntryBullet(r),
    `- **Warm-up and repetitions.** Each child first runs 20-step prompts for ≥ ${(s.warmupMs / 1000).toFixed(1)} s (XState needs ≈ 1 s to reach steady state), then times each N ${s.reps} times back to back and reports the median. A repetition shorter than 20 ms is re-timed as back-to-back prompts lasting ≥ 20 ms. No timed run follows a forced GC: a full \`gc()\` drops V8's type feedback for object shapes with no live instance, and the next prompt runs de-optimised (Keel ≈ 2× slower for that prompt, \`node --expose-gc --import tsx bench/extras/gc-effect.ts\`), a cost no agent pays in steady operation.`,
    `- **Skips (¹).** Before each N the child projects the time of all repetitions from the last two points (µs/step growing by the same factor per decade); over ${(s.budgetPerPointMs / 1000).toFixed(0)} s it skips that N and says so (see the raw samples). A skipped N means "grows too fast to measure here", not "failed".`,
    "- **Retained heap.** Separate, untimed runs (median of up to 3 per N, 1 at N ≥ 10 000, after every N was timed): `gc()` twice (after a few event-loop turns, so clean-up a runtime defers past its prompt has run) before and after one run while the runtime's handle is held; the difference is what the runtime keeps for that prompt (history, logs).",
    "- **Correctness guard.** Every run counts the tool's executions and fails the child if they differ from N × calls per step, so a runtime that stops early cannot look fast.",
  ].join("\n");
}

function rawSamples(r: BenchResults): string {
  const lines: string[] = [];
  for (const run of r.steps) {
    const head = `${run.label}, ${run.callsPerStep} call(s)/step (${(run.ms / 1000).toFixed(1)} s in its process)`;
    if (!run.result.ok) {
      lines.push(`${head}: FAILED — ${run.result.error}`);
      continue;
    }
    const pts = run.result.points.map((p) =>
      p.usPerStep === null
        ? `N=${p.steps}: skipped, ${p.skipped}`
        : `N=${p.steps}: ${p.samplesUs.map((x) => formatUs(x)).join(", ")} µs/step`,
    );
    lines.push(
      `${head}; warm-up ${run.result.warmupRuns} runs in ${(run.result.warmupMs / 1000).toFixed(1)} s`,
    );
    for (const p of pts) lines.push(`  ${p}`);
  }
  return [
    "<details><summary>Raw samples (every repetition, µs per step)</summary>",
    "",
    "```",
    ...lines,
    "```",
    "",
    "</details>",
  ].join("\n");
}

function failures(r: BenchResults): string {
  const failed = r.steps.filter((s) => !s.result.ok);
  if (failed.length === 0) return "None: every runtime ran on this Node.";
  return failed
    .map(
      (s) =>
        `- **${s.label}** (${s.callsPerStep} call(s)/step): \`${s.result.ok ? "" : s.result.error}\``,
    )
    .join("\n");
}

function notes(r: BenchResults): string {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const s of r.steps) {
    if (!s.result.ok || seen.has(s.label)) continue;
    seen.add(s.label);
    out.push(`- **${s.label}** — ${s.result.version}: ${s.result.notes.join("; ")}`);
  }
  return out.join("\n");
}

/** The RESULTS.md text; `chartFile` is the SVG's name next to it. */
export function renderResultsMarkdown(r: BenchResults, chartFile: string): string {
  const quick =
    r.mode === "quick" ? " — **quick run** (fewer steps and repetitions: indicative only)" : "";
  return [
    "# Keel benchmarks, side by side with the peers",
    "",
    `Written by \`npm run bench${r.mode === "quick" ? " -- --quick" : ""}\` on ${r.startedAt}, in ${(r.durationS / 60).toFixed(1)} min${quick}. How to run and read: [README.md](README.md).`,
    "",
    "## Machine",
    "",
    renderMachine(r),
    "",
    "## Method",
    "",
    method(r),
    "",
    "## 1. µs per step",
    "",
    `![µs per step against N, log-log, every runtime](${chartFile})`,
    "",
    "### One tool call per step",
    "",
    renderStepSection(r, 1),
    "",
    "### 8 parallel tool calls per step",
    "",
    renderStepSection(r, 8),
    "",
    "¹ skipped: projected over the time budget (see Method).",
    "",
    "## 2. Flatness (µs/step at the largest N ÷ µs/step at N = 10; 1.00× is flat)",
    "",
    renderFlatness(r),
    "",
    "## 3. Argument preview (streamed tool arguments)",
    "",
    renderExtra(r.argPreview, "`benchArgPreview()` in bench/arg-preview.bench.ts"),
    "",
    "## 4. Memory",
    "",
    renderSessions(r.sessions),
    "",
    "## 5. Store",
    "",
    renderExtra(r.store, "bench/store.bench.ts"),
    "",
    "## Tool-call preparation",
    "",
    renderExtra(r.prepareCall, "`benchPrepareCall()` in bench/prepare-call.bench.ts"),
    "",
    "## Harness configurations",
    "",
    notes(r),
    "",
    "## Runtimes that could not run",
    "",
    failures(r),
    "",
    rawSamples(r),
    "",
  ].join("\n");
}
