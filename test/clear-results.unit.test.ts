import { describe, expect, it } from "vitest";
import type { Message } from "../contracts/messages.ts";
import { clearedResultText, resultsToClear } from "../session/clear-results.ts";
import type { LogEntry } from "../session/entries.ts";

// The selection behind session.clearToolResults(), on hand-made views: which results are old
// enough, which are kept, and which are not worth clearing.

const long = (tag: string) => `${tag}:${"x".repeat(400)}`;
const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
const assistant = (text: string): Message => ({
  role: "assistant",
  content: [{ type: "text", text }],
});
const tool = (callId: string, content: string): Message => ({
  role: "tool",
  content: [{ type: "tool-result", callId, name: "t", content }],
});

/** A view and its sources: each message's source entry is `e<i>`; `results` say which are recorded results. */
function view(
  messages: Message[],
  recorded: (i: number) => boolean = (i) => messages[i].role === "tool",
) {
  const sources = messages.map((_, i) => `e${i}`);
  const get = (id: string): LogEntry | undefined => {
    const i = Number(id.slice(1));
    if (!(i in messages)) return undefined;
    return (recorded(i) ? { id, type: "call_result" } : { id, type: "user_message" }) as LogEntry;
  };
  return { messages, sources, get };
}

const select = (
  v: ReturnType<typeof view>,
  options: { olderThanSteps?: number; keepLast?: number } = {},
) =>
  resultsToClear(v.messages, v.sources, v.get, {
    olderThanSteps: options.olderThanSteps ?? 0,
    keepLast: options.keepLast ?? 0,
  }).map((c) => c.entryId);

// user, step 1 (call a), a's result, step 2 (call b), b's result, step 3 (text)
const threeSteps = () =>
  view([
    user("go"),
    assistant("call a"),
    tool("a", long("a")),
    assistant("call b"),
    tool("b", long("b")),
    assistant("done"),
  ]);

describe("resultsToClear", () => {
  it("the note names the bytes, the read_result tool and the id to read the result back with", () => {
    expect(clearedResultText("e7", 1234)).toBe(
      '[result cleared from the context to save space: 1234 bytes; call read_result with {"id":"e7"} to read it again]',
    );
  });

  it("clears every recorded result by default, in view order, with the note and the bytes", () => {
    const v = threeSteps();
    const out = resultsToClear(v.messages, v.sources, v.get, { olderThanSteps: 0, keepLast: 0 });
    expect(out).toEqual([
      { entryId: "e2", note: clearedResultText("e2", 402), bytes: 402 },
      { entryId: "e4", note: clearedResultText("e4", 402), bytes: 402 },
    ]);
  });

  it("counts steps as model responses: olderThanSteps 2 clears only the result made two responses ago", () => {
    expect(select(threeSteps(), { olderThanSteps: 1 })).toEqual(["e2", "e4"]);
    expect(select(threeSteps(), { olderThanSteps: 2 })).toEqual(["e2"]);
    expect(select(threeSteps(), { olderThanSteps: 3 })).toEqual([]);
  });

  it("a result before any model response is as old as the view's step count", () => {
    const v = view([tool("a", long("a")), assistant("one"), assistant("two")]);
    expect(select(v, { olderThanSteps: 2 })).toEqual(["e0"]);
    expect(select(v, { olderThanSteps: 3 })).toEqual([]);
  });

  it("keeps the newest keepLast results, counting only recorded results", () => {
    expect(select(threeSteps(), { keepLast: 1 })).toEqual(["e2"]);
    expect(select(threeSteps(), { keepLast: 2 })).toEqual([]);
    expect(select(threeSteps(), { keepLast: 5 })).toEqual([]);
    // A message that is not a tool result never counts toward keepLast, even when its source
    // entry is a recorded result.
    const v = view([assistant("call a"), tool("a", long("a")), user("later")], () => true);
    expect(select(v, { keepLast: 1 })).toEqual([]);
  });

  it("leaves patched slots alone: a result with no recorded entry, or another kind of entry", () => {
    const v = threeSteps();
    const noEntry = { ...v, get: (id: string) => (id === "e2" ? undefined : v.get(id)) };
    expect(select(noEntry)).toEqual(["e4"]);
    const patched = view(v.messages, (i) => i === 4);
    expect(select(patched)).toEqual(["e4"]);
  });

  it("leaves a result already cleared, and one no longer than its note", () => {
    const cleared = clearedResultText("e9", 5000);
    const longCleared = `${cleared}${" ".repeat(400)}`;
    expect(select(view([assistant("s"), tool("a", longCleared)]))).toEqual([]);
    // A result as long as its note is not worth clearing; one character longer is.
    let n = 50;
    while (clearedResultText("e1", n).length !== n) n++;
    expect(select(view([assistant("s"), tool("a", "y".repeat(n))]))).toEqual([]);
    let m = n + 1;
    while (clearedResultText("e1", m).length >= m) m++;
    expect(select(view([assistant("s"), tool("a", "y".repeat(m))]))).toEqual(["e1"]);
    // Text that merely ends like a note is an ordinary result.
    expect(select(view([assistant("s"), tool("a", `${"z".repeat(400)}[result cleared`)]))).toEqual([
      "e1",
    ]);
  });
});
