/**
 * @mariozechner/pi-agent-core: its stateful `Agent` with a `streamFn` fake that streams one
 * assistant message (start, per call toolcall_start/delta/end, done) from an
 * `AssistantMessageEventStream`, default `convertToLlm`, parallel tool execution, no listeners.
 */
import { runStepChild, type StepHarness } from "../lib/measure.ts";
import { callId, installedVersion, loadPeer, workload } from "../lib/workload.ts";

// The slice of the peers' API this harness uses (see lib/workload.ts `loadPeer`).
interface ToolCallBlock {
  type: "toolCall";
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}
interface AssistantMessage {
  role: "assistant";
  content: (ToolCallBlock | { type: "text"; text: string })[];
  api: string;
  provider: string;
  model: string;
  usage: typeof emptyUsage;
  stopReason: "stop" | "toolUse";
  timestamp: number;
}
interface EventStream {
  push(event: Record<string, unknown>): void;
  end(result?: AssistantMessage): void;
}
interface PiAi {
  createAssistantMessageEventStream(): EventStream;
}
interface AgentTool {
  name: string;
  label: string;
  description: string;
  parameters: unknown;
  execute(
    id: string,
    params: { path: string },
  ): Promise<{ content: { type: "text"; text: string }[]; details: unknown }>;
}
interface PiAgent {
  prompt(input: string): Promise<void>;
  state: { messages: unknown[]; errorMessage?: string };
}
interface PiAgentCore {
  Agent: new (options: {
    initialState: { systemPrompt: string; model: unknown; tools: AgentTool[] };
    streamFn: (model: unknown, context: unknown, options: unknown) => EventStream;
    toolExecution: "parallel" | "sequential";
  }) => PiAgent;
}
interface TypeBox {
  Type: { Object(props: Record<string, unknown>): unknown; String(): unknown };
}

const emptyUsage = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

const model = {
  id: "fake-1",
  name: "Fake",
  api: "fake",
  provider: "fake",
  baseUrl: "http://127.0.0.1:0",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 1_000_000,
  maxTokens: 4096,
};

function message(
  content: AssistantMessage["content"],
  stopReason: AssistantMessage["stopReason"],
): AssistantMessage {
  return {
    role: "assistant",
    content,
    api: "fake",
    provider: "fake",
    model: "fake-1",
    usage: emptyUsage,
    stopReason,
    timestamp: Date.now(),
  };
}

async function createPiHarness(): Promise<StepHarness> {
  const { Agent } = await loadPeer<PiAgentCore>("@mariozechner/pi-agent-core");
  const { createAssistantMessageEventStream } = await loadPeer<PiAi>("@mariozechner/pi-ai");
  const { Type } = await loadPeer<TypeBox>("typebox");
  let executions = 0;
  const tool: AgentTool = {
    name: workload.toolName,
    label: "Touch",
    description: workload.toolDescription,
    parameters: Type.Object({ path: Type.String() }),
    async execute() {
      executions++;
      return { content: [{ type: "text", text: workload.toolResult }], details: undefined };
    },
  };
  return {
    label: "pi-agent-core",
    version: `@mariozechner/pi-agent-core ${installedVersion("@mariozechner/pi-agent-core")}`,
    notes: ["Agent.prompt with a streamFn fake, toolExecution parallel, no subscribers"],
    async run(steps, callsPerStep) {
      executions = 0;
      let step = 0;
      const streamFn = (): EventStream => {
        step++;
        const stream = createAssistantMessageEventStream();
        if (step > steps) {
          const final = message([{ type: "text", text: workload.finalText }], "stop");
          stream.push({ type: "start", partial: final });
          stream.push({ type: "text_start", contentIndex: 0, partial: final });
          stream.push({
            type: "text_delta",
            contentIndex: 0,
            delta: workload.finalText,
            partial: final,
          });
          stream.push({
            type: "text_end",
            contentIndex: 0,
            content: workload.finalText,
            partial: final,
          });
          stream.push({ type: "done", reason: "stop", message: final });
          return stream;
        }
        const calls: ToolCallBlock[] = [];
        for (let i = 0; i < callsPerStep; i++) {
          calls.push({
            type: "toolCall",
            id: callId(step, i),
            name: workload.toolName,
            arguments: { ...workload.args },
          });
        }
        const msg = message(calls, "toolUse");
        stream.push({ type: "start", partial: msg });
        for (let i = 0; i < callsPerStep; i++) {
          stream.push({ type: "toolcall_start", contentIndex: i, partial: msg });
          stream.push({
            type: "toolcall_delta",
            contentIndex: i,
            delta: workload.argsJson,
            partial: msg,
          });
          stream.push({ type: "toolcall_end", contentIndex: i, toolCall: calls[i], partial: msg });
        }
        stream.push({ type: "done", reason: "toolUse", message: msg });
        return stream;
      };
      const agent = new Agent({
        initialState: { systemPrompt: workload.system, model, tools: [tool] },
        streamFn,
        toolExecution: "parallel",
      });
      await agent.prompt(workload.prompt);
      if (agent.state.errorMessage !== undefined)
        throw new Error(`pi-agent-core: ${agent.state.errorMessage}`);
      return { toolExecutions: executions, keep: agent };
    },
  };
}

await runStepChild(createPiHarness);
