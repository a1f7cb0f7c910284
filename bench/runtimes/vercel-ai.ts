/**
 * Vercel AI SDK (`ai`): `generateText` with `MockLanguageModelV3` from `ai/test`, a zod tool,
 * `stopWhen: stepCountIs(steps + 1)`, telemetry off (the default). The mock's call log is
 * cleared on every call so the mock is not what grows.
 */
import { runStepChild, type StepHarness } from "../lib/measure.ts";
import { callId, installedVersion, loadPeer, workload } from "../lib/workload.ts";

// The slice of the peers' API this harness uses (see lib/workload.ts `loadPeer`).
interface GenerateResultV3 {
  content: (
    | { type: "tool-call"; toolCallId: string; toolName: string; input: string }
    | { type: "text"; text: string }
  )[];
  finishReason: { unified: "stop" | "tool-calls"; raw: string | undefined };
  usage: {
    inputTokens: { total: number; noCache: number; cacheRead: number; cacheWrite: number };
    outputTokens: { total: number; text: number; reasoning: number };
  };
  warnings: unknown[];
}
interface MockModel {
  doGenerateCalls: unknown[];
}
interface AiTest {
  MockLanguageModelV3: new (options: { doGenerate: () => Promise<GenerateResultV3> }) => MockModel;
}
interface Ai {
  generateText(options: {
    model: MockModel;
    system: string;
    prompt: string;
    tools: Record<string, unknown>;
    stopWhen: unknown;
  }): Promise<{ steps: unknown[]; text: string }>;
  stepCountIs(n: number): unknown;
  tool(definition: {
    description: string;
    inputSchema: unknown;
    execute: (input: { path: string }) => Promise<string>;
  }): unknown;
}
interface Zod {
  z: { object(shape: Record<string, unknown>): unknown; string(): unknown };
}

const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};

async function createVercelHarness(): Promise<StepHarness> {
  const { generateText, stepCountIs, tool } = await loadPeer<Ai>("ai");
  const { MockLanguageModelV3 } = await loadPeer<AiTest>("ai/test");
  const { z } = await loadPeer<Zod>("zod");
  let executions = 0;
  const touch = tool({
    description: workload.toolDescription,
    inputSchema: z.object({ path: z.string() }),
    async execute() {
      executions++;
      return workload.toolResult;
    },
  });
  return {
    label: "Vercel ai",
    version: `ai ${installedVersion("ai")}`,
    notes: ["generateText + MockLanguageModelV3 (doGenerate), stopWhen stepCountIs(N+1)"],
    async run(steps, callsPerStep) {
      executions = 0;
      let step = 0;
      const model: MockModel = new MockLanguageModelV3({
        async doGenerate() {
          model.doGenerateCalls.length = 0;
          step++;
          if (step > steps) {
            return {
              content: [{ type: "text", text: workload.finalText }],
              finishReason: { unified: "stop", raw: "stop" },
              usage,
              warnings: [],
            };
          }
          const content: GenerateResultV3["content"] = [];
          for (let i = 0; i < callsPerStep; i++) {
            content.push({
              type: "tool-call",
              toolCallId: callId(step, i),
              toolName: workload.toolName,
              input: workload.argsJson,
            });
          }
          return {
            content,
            finishReason: { unified: "tool-calls", raw: "tool_calls" },
            usage,
            warnings: [],
          };
        },
      });
      const result = await generateText({
        model,
        system: workload.system,
        prompt: workload.prompt,
        tools: { [workload.toolName]: touch },
        stopWhen: stepCountIs(steps + 1),
      });
      if (result.text !== workload.finalText) {
        throw new Error(
          `Vercel ai ended with ${JSON.stringify(result.text)} after ${result.steps.length} steps`,
        );
      }
      return { toolExecutions: executions, keep: result };
    },
  };
}

await runStepChild(createVercelHarness);
