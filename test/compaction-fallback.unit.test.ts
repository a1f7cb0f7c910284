// The mechanical summary keeps the work (issue 40): it kept 160 characters of each message.
import { describe, expect, it } from "vitest";
import { type Message, userText } from "../contracts/messages.ts";
import { mechanicalSummary } from "../session/compaction-fallback.ts";
import { NO_RESULT_TEXT } from "../session/projection.ts";

const assistant = (text: string, calls: { id: string; name: string }[] = []): Message => ({
  role: "assistant",
  content: [
    { type: "text", text },
    ...calls.map((c) => ({ type: "tool-call" as const, id: c.id, name: c.name, arguments: "{}" })),
  ],
});
const tool = (callId: string, name: string, content: string): Message => ({
  role: "tool",
  content: [{ type: "tool-result", callId, name, content }],
});

describe("mechanicalSummary", () => {
  const request = `Refactor the parser in src/parse.ts so that ${"it keeps comments ".repeat(30)}and add tests.`;
  const messages: Message[] = [
    userText(`an early question ${"e".repeat(2000)}`),
    ...Array.from({ length: 20 }, (_, i) => assistant(`old step ${i} ${"o".repeat(300)}`)),
    userText(request),
    assistant("I will read the file first.", [{ id: "c1", name: "read_file" }]),
    tool("c1", "read_file", `export function parse() { ${"x".repeat(400)} }`),
    assistant("Now the tests.", [{ id: "c2", name: "run_tests" }]),
    tool("c2", "run_tests", NO_RESULT_TEXT),
  ];
  const summary = mechanicalSummary(messages, 4000);

  it("keeps the last user request verbatim", () => {
    expect(summary).toContain(request);
  });

  it("lists the calls left without a result", () => {
    expect(summary).toMatch(/Unfinished calls:\n- run_tests \(c2\): no result recorded/);
  });

  it("keeps the most recent messages whole, and counts the older ones it leaves out", () => {
    expect(summary).toContain(`export function parse() { ${"x".repeat(400)} }`);
    expect(summary).toContain("[called read_file({})]");
    expect(summary).toMatch(/- \(\d+ older messages left out\)/);
    expect(summary).not.toContain("an early question");
  });

  it("stays within its room and says it is mechanical", () => {
    expect(summary.length).toBeLessThanOrEqual(4000);
    expect(summary).toMatch(/^Mechanical summary/);
  });
});
