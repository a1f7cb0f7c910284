/**
 * OpenAI Agents SDK (`@openai/agents`): `Runner.run` (non-streamed, its fastest mode) of an
 * `Agent` with one zod `tool()`, a fake `Model` whose `getResponse` returns function calls,
 * tracing disabled globally and on the runner, `maxTurns` N + 1.
 */
import { runStepChild, type StepHarness } from "../lib/measure.ts";
import { callId, installedVersion, loadPeer, workload } from "../lib/workload.ts";

// The slice of the peers' API this harness uses (see lib/workload.ts `loadPeer`).
type OutputItem =
  | { type: "function_call"; callId: string; name: string; arguments: string; status: "completed" }
  | {
      type: "message";
      role: "assistant";
      status: "completed";
      content: { type: "output_text"; text: string }[];
    };
interface ModelResponse {
  usage: unknown;
  output: OutputItem[];
}
interface FakeModel {
  getResponse(request: unknown): Promise<ModelResponse>;
  getStreamedResponse(request: unknown): AsyncIterable<never>;
}
interface Agents {
  Agent: new (config: {
    name: string;
    instructions: string;
    model: FakeModel;
    tools: unknown[];
  }) => unknown;
  Runner: new (config: {
    tracingDisabled: boolean;
  }) => {
    run(
      agent: unknown,
      input: string,
      options: { maxTurns: number },
    ): Promise<{ finalOutput?: unknown }>;
  };
  Usage: new () => unknown;
  setTracingDisabled(disabled: boolean): void;
  tool(options: {
    name: string;
    description: string;
    parameters: unknown;
    execute: (input: { path: string }) => Promise<string>;
  }): unknown;
}
interface Zod {
  z: { object(shape: Record<string, unknown>): unknown; string(): unknown };
}

async function createOpenAiAgentsHarness(): Promise<StepHarness> {
  const { Agent, Runner, Usage, setTracingDisabled, tool } =
    await loadPeer<Agents>("@openai/agents");
  const { z } = await loadPeer<Zod>("zod");
  setTracingDisabled(true);
  let executions = 0;
  const touch = tool({
    name: workload.toolName,
    description: workload.toolDescription,
    parameters: z.object({ path: z.string() }),
    async execute() {
      executions++;
      return workload.toolResult;
    },
  });
  const runner = new Runner({ tracingDisabled: true });
  return {
    label: "@openai/agents",
    version: `@openai/agents ${installedVersion("@openai/agents")}`,
    notes: ["Runner.run non-streamed, fake Model.getResponse, tracing disabled"],
    async run(steps, callsPerStep) {
      executions = 0;
      let step = 0;
      const model: FakeModel = {
        async getResponse() {
          step++;
          if (step > steps) {
            return {
              usage: new Usage(),
              output: [
                {
                  type: "message",
                  role: "assistant",
                  status: "completed",
                  content: [{ type: "output_text", text: workload.finalText }],
                },
              ],
            };
          }
          const output: OutputItem[] = [];
          for (let i = 0; i < callsPerStep; i++) {
            output.push({
              type: "function_call",
              callId: callId(step, i),
              name: workload.toolName,
              arguments: workload.argsJson,
              status: "completed",
            });
          }
          return { usage: new Usage(), output };
        },
        // biome-ignore lint/correctness/useYield: the benchmark only runs non-streamed.
        async *getStreamedResponse() {
          throw new Error("the benchmark runs @openai/agents non-streamed");
        },
      };
      const agent = new Agent({
        name: "bench",
        instructions: workload.system,
        model,
        tools: [touch],
      });
      const result = await runner.run(agent, workload.prompt, { maxTurns: steps + 1 });
      if (result.finalOutput !== workload.finalText) {
        throw new Error(`@openai/agents ended with ${JSON.stringify(result.finalOutput)}`);
      }
      return { toolExecutions: executions, keep: result };
    },
  };
}

await runStepChild(createOpenAiAgentsHarness);
