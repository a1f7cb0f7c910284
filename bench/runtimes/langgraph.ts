/**
 * LangGraph.js (`@langchain/langgraph`), the durable peer: the ReAct graph its docs build, a
 * `StateGraph(MessagesAnnotation)` with a model node, the prebuilt `ToolNode` (parallel calls)
 * and `toolsCondition`, compiled with a checkpointer and invoked on a fresh `thread_id`, so every
 * superstep is checkpointed (durability "async", the default) as in a user's graph. The fake chat
 * model is a minimal `BaseChatModel` subclass whose `_generate` returns an `AIMessage` with
 * `callsPerStep` tool calls until N, then text (O(1) per call, no call log). Variant "memory":
 * a new `MemorySaver` per run; "sqlite": one `SqliteSaver` on a temporary file for the process
 * (WAL, synchronous NORMAL: better-sqlite3's default in WAL, the same durability as Keel's
 * "process"). A fresh compiled graph per run; `recursionLimit` 2N + 5 (two supersteps a step).
 * No callbacks, LangSmith tracing off (no LANGSMITH_* variables).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runStepChild, type StepHarness } from "../lib/measure.ts";
import type { StepBenchOptions } from "../lib/protocol.ts";
import { callId, installedVersion, loadPeer, workload } from "../lib/workload.ts";

// The slice of the peers' API this harness uses (see lib/workload.ts `loadPeer`).
interface ToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
  type: "tool_call";
}
interface Message {
  content: unknown;
}
interface ChatResult {
  generations: { text: string; message: Message }[];
}
type BaseChatModelClass = abstract new (
  fields: Record<string, unknown>,
) => {
  invoke(messages: Message[]): Promise<Message>;
};
interface CoreLanguageModels {
  BaseChatModel: BaseChatModelClass;
}
interface CoreMessages {
  AIMessage: new (fields: { content: string; tool_calls?: ToolCall[] }) => Message;
  HumanMessage: new (content: string) => Message;
  SystemMessage: new (content: string) => Message;
}
interface CoreTools {
  tool(
    fn: (input: { path: string }) => Promise<string>,
    fields: { name: string; description: string; schema: unknown },
  ): unknown;
}
interface Checkpointer {
  _brand?: "checkpointer";
}
interface CompiledGraph {
  invoke(
    input: { messages: Message[] },
    config: { configurable: { thread_id: string }; recursionLimit: number },
  ): Promise<{ messages: Message[] }>;
}
interface GraphBuilder {
  addNode(name: string, node: unknown): GraphBuilder;
  addEdge(from: string, to: string): GraphBuilder;
  addConditionalEdges(from: string, condition: unknown): GraphBuilder;
  compile(options: { checkpointer: Checkpointer }): CompiledGraph;
}
interface LangGraph {
  StateGraph: new (state: unknown) => GraphBuilder;
  MessagesAnnotation: unknown;
  MemorySaver: new () => Checkpointer;
  START: string;
}
interface LangGraphPrebuilt {
  ToolNode: new (tools: unknown[]) => unknown;
  toolsCondition: unknown;
}
interface LangGraphSqlite {
  SqliteSaver: {
    fromConnString(path: string): Checkpointer & { db: { close(): void } };
  };
}
interface Zod {
  z: { object(shape: Record<string, unknown>): unknown; string(): unknown };
}

async function createLangGraphHarness(o: StepBenchOptions): Promise<StepHarness> {
  const variant = o.variant ?? "memory";
  if (variant !== "memory" && variant !== "sqlite") {
    throw new Error(
      `langgraph variant must be "memory" or "sqlite", got ${JSON.stringify(variant)}`,
    );
  }
  const { StateGraph, MessagesAnnotation, MemorySaver, START } =
    await loadPeer<LangGraph>("@langchain/langgraph");
  const { ToolNode, toolsCondition } = await loadPeer<LangGraphPrebuilt>(
    "@langchain/langgraph/prebuilt",
  );
  const { BaseChatModel } = await loadPeer<CoreLanguageModels>(
    "@langchain/core/language_models/chat_models",
  );
  const { AIMessage, HumanMessage, SystemMessage } = await loadPeer<CoreMessages>(
    "@langchain/core/messages",
  );
  const { tool } = await loadPeer<CoreTools>("@langchain/core/tools");
  const { z } = await loadPeer<Zod>("zod");

  let executions = 0;
  const touch = tool(
    async () => {
      executions++;
      return workload.toolResult;
    },
    {
      name: workload.toolName,
      description: workload.toolDescription,
      schema: z.object({ path: z.string() }),
    },
  );

  /** The fake: `callsPerStep` tool calls per request until `steps`, then the final text. */
  class FakeToolCallingModel extends BaseChatModel {
    step = 0;
    constructor(
      private readonly steps: number,
      private readonly callsPerStep: number,
    ) {
      super({});
    }
    _llmType(): string {
      return "keel-bench-fake";
    }
    async _generate(): Promise<ChatResult> {
      this.step++;
      if (this.step > this.steps) {
        const message = new AIMessage({ content: workload.finalText });
        return { generations: [{ text: workload.finalText, message }] };
      }
      const toolCalls: ToolCall[] = [];
      for (let i = 0; i < this.callsPerStep; i++) {
        toolCalls.push({
          id: callId(this.step, i),
          name: workload.toolName,
          args: { ...workload.args },
          type: "tool_call",
        });
      }
      const message = new AIMessage({ content: "", tool_calls: toolCalls });
      return { generations: [{ text: "", message }] };
    }
  }

  const dir = variant === "sqlite" ? mkdtempSync(join(tmpdir(), "keel-bench-langgraph-")) : null;
  const sqlite =
    dir === null
      ? null
      : (
          await loadPeer<LangGraphSqlite>("@langchain/langgraph-checkpoint-sqlite")
        ).SqliteSaver.fromConnString(join(dir, "checkpoints.db"));
  let thread = 0;
  const sqliteVersion = installedVersion("@langchain/langgraph-checkpoint-sqlite");
  return {
    label: variant === "sqlite" ? "LangGraph (SQLite)" : "LangGraph (MemorySaver)",
    version:
      `@langchain/langgraph ${installedVersion("@langchain/langgraph")}, @langchain/core ${installedVersion("@langchain/core")}` +
      (variant === "sqlite"
        ? `, @langchain/langgraph-checkpoint-sqlite ${sqliteVersion}, better-sqlite3 ${installedVersion("better-sqlite3")}`
        : ""),
    notes: [
      "StateGraph(MessagesAnnotation): model node + prebuilt ToolNode + toolsCondition, invoke on a new thread_id, durability async (the default), recursionLimit 2N + 5",
      variant === "sqlite"
        ? "SqliteSaver.fromConnString(tmp file), one for the process (WAL, synchronous NORMAL)"
        : "MemorySaver, a new one per run",
      "fake model: a BaseChatModel subclass returning AIMessage tool_calls; tool() with a zod schema; no callbacks, no tracing",
    ],
    async run(steps, callsPerStep) {
      executions = 0;
      const model = new FakeToolCallingModel(steps, callsPerStep);
      const checkpointer = sqlite ?? new MemorySaver();
      const graph = new StateGraph(MessagesAnnotation)
        .addNode("agent", async (state: { messages: Message[] }) => ({
          messages: [await model.invoke(state.messages)],
        }))
        .addNode("tools", new ToolNode([touch]))
        .addEdge(START, "agent")
        .addConditionalEdges("agent", toolsCondition)
        .addEdge("tools", "agent")
        .compile({ checkpointer });
      thread++;
      const result = await graph.invoke(
        { messages: [new SystemMessage(workload.system), new HumanMessage(workload.prompt)] },
        { configurable: { thread_id: `bench-${thread}` }, recursionLimit: 2 * steps + 5 },
      );
      const last = result.messages.at(-1);
      if (last?.content !== workload.finalText) {
        throw new Error(`LangGraph ended with ${JSON.stringify(last?.content)}`);
      }
      return { toolExecutions: executions, keep: { graph, checkpointer, result } };
    },
    async close() {
      sqlite?.db.close();
      if (dir !== null) rmSync(dir, { recursive: true, force: true });
    },
  };
}

await runStepChild(createLangGraphHarness);
