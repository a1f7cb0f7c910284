/**
 * The floor: a hand-written model/tool loop with no runtime at all. An async-generator fake
 * model streams Keel's normalised `ModelEvent`s (one call per tool call: start, one arguments
 * delta, end; then finish), the loop assembles the calls, parses the arguments, runs the tool
 * calls of a step with `Promise.all` and appends the results to the message list.
 */
import type { ChatMessage, ChatToolCall } from "../../contracts/chat.ts";
import type { ModelEvent } from "../../contracts/model.ts";
import { runStepChild, type StepHarness } from "../lib/measure.ts";
import { callId, workload } from "../lib/workload.ts";

async function* fakeStream(
  step: number,
  steps: number,
  callsPerStep: number,
): AsyncGenerator<ModelEvent> {
  if (step > steps) {
    yield { type: "text.delta", text: workload.finalText };
    yield { type: "finish", reason: "stop" };
    return;
  }
  for (let i = 0; i < callsPerStep; i++) {
    yield { type: "call.start", index: i, id: callId(step, i), name: workload.toolName };
    yield { type: "call.delta", index: i, argumentsDelta: workload.argsJson };
    yield { type: "call.end", index: i };
  }
  yield { type: "finish", reason: "tool_calls" };
}

function createBareHarness(): StepHarness {
  let executions = 0;
  const execute = async (args: { path: string }): Promise<string> => {
    if (typeof args.path !== "string") throw new Error("path must be a string");
    executions++;
    return workload.toolResult;
  };
  return {
    label: "bare loop",
    version: "hand-written",
    notes: ["async-generator fake stream, JSON.parse of arguments, Promise.all per step"],
    async run(steps, callsPerStep) {
      executions = 0;
      const messages: ChatMessage[] = [
        { role: "system", content: workload.system },
        { role: "user", content: workload.prompt },
      ];
      for (let step = 1; ; step++) {
        let text = "";
        const calls: ChatToolCall[] = [];
        for await (const ev of fakeStream(step, steps, callsPerStep)) {
          if (ev.type === "text.delta") text += ev.text;
          else if (ev.type === "call.start") {
            calls[ev.index] = {
              id: ev.id ?? "",
              type: "function",
              function: { name: ev.name ?? "", arguments: "" },
            };
          } else if (ev.type === "call.delta")
            calls[ev.index].function.arguments += ev.argumentsDelta;
        }
        messages.push(
          calls.length > 0
            ? { role: "assistant", content: text || null, tool_calls: calls }
            : { role: "assistant", content: text },
        );
        if (calls.length === 0) break;
        const results = await Promise.all(
          calls.map((c) => execute(JSON.parse(c.function.arguments) as { path: string })),
        );
        for (let i = 0; i < calls.length; i++) {
          messages.push({ role: "tool", tool_call_id: calls[i].id, content: results[i] });
        }
      }
      return { toolExecutions: executions, keep: messages };
    },
  };
}

await runStepChild(async () => createBareHarness());
