// What a person is shown of untrusted text: approval questions, the trace, `keel show` and the
// protocol's permission.request display (issue 27, finding 1 and the terminal-sequence finding).
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  approvalQuestion,
  MAX_ASKED_CHARS,
  pages,
  terminalAsk,
  withApproval,
} from "../cli/approval.ts";
import { renderProjection, renderTree } from "../cli/show-format.ts";
import { printable, shownCall } from "../cli/shown-text.ts";
import { createTrace } from "../cli/trace.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import type { ToolContext } from "../tools/types.ts";

/** The reproduction of finding 1: a hidden tail after 320 spaces. */
const HIDDEN = `ls -la${" ".repeat(320)}; touch HIDDEN`;

/** Every escape sequence a hostile text used: title change, screen clear, OSC 52 clipboard. */
const SEQUENCES = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZWNobyBoaQ==\x07\x9b31m";
const raw = (text: string) => /[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(text);

describe("approval shows everything that runs", () => {
  const shell = defineTool({
    name: "shell",
    description: "runs a command",
    parameters: z.object({ command: z.string() }),
    traits: { risk: "high" },
    execute: ({ command }) => `ran ${command}`,
  });
  const ctx = { signal: new AbortController().signal } as unknown as ToolContext;

  it("asks about `ls -la`, 320 spaces, `; touch HIDDEN` with the hidden tail in the question (it was cut at 300 characters and the tail ran)", async () => {
    const asked: string[] = [];
    const [guarded] = withApproval([shell], {
      ask: async (question) => {
        asked.push(question);
        return false;
      },
    });
    await guarded.execute({ command: HIDDEN }, ctx);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("; touch HIDDEN");
    expect(asked[0]).toContain("⟨320 spaces⟩");
    expect(asked[0]).toMatch(/runs of whitespace are shown as/);
  });

  it("never cuts a long command: every character of a 5 000-character command is in the question, paged on the terminal", async () => {
    const command = Array.from({ length: 500 }, (_, i) => `echo ${i};`).join("");
    const question = approvalQuestion("shell", { command });
    expect(question).toContain(command);
    const split = pages(question);
    expect(split.length).toBeGreaterThan(1);
    expect(split.join("")).toBe(question);
  });

  it("the terminal shows each page and asks y/N only after the last one; typing n on a page refuses", async () => {
    const question = approvalQuestion("shell", { command: "x".repeat(4000) });
    const run = async (answers: string[]) => {
      const input = new PassThrough();
      const output = new PassThrough();
      let shown = "";
      output.on("data", (d) => {
        shown += d;
        if (/Enter for more|\[y\/N\] $/.test(String(d))) input.write(`${answers.shift()}\n`);
      });
      const ok = await terminalAsk(input, output)(question, new AbortController().signal);
      return { ok, shown };
    };
    const count = pages(question).length;
    const all = await run([...Array.from({ length: count - 1 }, () => ""), "y"]);
    expect(all.ok).toBe(true);
    for (let i = 1; i < count; i++) expect(all.shown).toContain(`page ${i} of ${count}`);
    expect(all.shown.lastIndexOf("[y/N]")).toBeGreaterThan(
      all.shown.lastIndexOf(`page ${count - 1} of ${count}`),
    );
    expect((await run(["n"])).ok).toBe(false);
  });

  it("refuses without asking when the arguments are too long for anyone to read", async () => {
    let asked = 0;
    const [guarded] = withApproval([shell], {
      ask: async () => {
        asked++;
        return true;
      },
    });
    const result = await guarded.execute({ command: "y".repeat(MAX_ASKED_CHARS) }, ctx);
    expect(asked).toBe(0);
    expect(result).toMatchObject({ ok: false, code: "DENIED" });
    expect((result as { message: string }).message).toMatch(/too long to show/);
  });

  it("escapes terminal control sequences and invisible characters in the question", () => {
    const question = approvalQuestion("shell", { command: `echo ok${SEQUENCES}\u202e\u200b` });
    expect(raw(question)).toBe(false);
    expect(question).not.toMatch(/[\u202e\u200b]/);
    expect(question).toContain("\\u001b");
  });

  it("shownCall counts each run of spaces and leaves short ones alone", () => {
    expect(shownCall({ a: "x   y", b: `p${" ".repeat(9)}q` })).toEqual({
      text: '{"a":"x   y","b":"p⟨9 spaces⟩q"}',
      collapsed: true,
    });
    expect(shownCall({ a: "x y" }).collapsed).toBe(false);
  });
});

describe("the trace and keel show never print raw control sequences from model or tool text", () => {
  const ev = (body: Record<string, unknown>): AgentEvent =>
    ({ sessionId: "s", at: 1000, ...body }) as AgentEvent;

  it("the trace escapes them in assistant text, tool results and call arguments, and counts hidden spaces", () => {
    const chunks: string[] = [];
    const trace = createTrace({ out: { write: (c: string) => chunks.push(c) }, color: false });
    trace.onEvent(ev({ type: "message.committed", attemptId: "a", text: `hi${SEQUENCES}` }));
    trace.onEvent(
      ev({ type: "call.started", callId: "c1", name: "shell", args: { command: HIDDEN } }),
    );
    trace.onEvent(
      ev({
        type: "call.settled",
        callId: "c1",
        name: "shell",
        outcome: "completed",
        result: { ok: true, content: `out${SEQUENCES}` },
      }),
    );
    const text = chunks.join("");
    expect(raw(text.replace(/\n/g, ""))).toBe(false);
    expect(text).toContain("⟨320 spaces⟩");
    expect(text).toContain("(spaces counted)");
  });

  it("keel show's tree and projection escape them (a title change, a screen clear and an OSC 52 clipboard write were printed raw)", () => {
    const entries = [
      { id: "u1", parentId: null, seq: 1, at: 0, type: "user_message", text: `hello${SEQUENCES}` },
      {
        id: "a1",
        parentId: "u1",
        seq: 2,
        at: 0,
        type: "assistant_message",
        turnId: "t",
        attemptId: "a",
        finishReason: "stop",
        content: [{ type: "text", text: `answer${SEQUENCES}` }],
      },
    ] as unknown as LogEntry[];
    const tree = renderTree(entries, "a1");
    expect(raw(tree.replace(/\n/g, ""))).toBe(false);
    expect(tree).toContain("\\u001b]52;c;");
    const projection = renderProjection([
      { role: "user", content: `q${SEQUENCES}` },
      { role: "assistant", content: `a${SEQUENCES}` },
      { role: "tool", tool_call_id: "c", content: `r${SEQUENCES}` },
    ]);
    expect(raw(projection.replace(/\n/g, ""))).toBe(false);
  });

  it("shows runs of characters a terminal draws as blanks (U+2800, U+3164, …) and invisible tag characters as escapes, so nothing hides behind them (issue 41: they were shown raw)", () => {
    const hidden = [
      "\u2800",
      "\u3164",
      "\u115f",
      "\uffa0",
      "\u00ad",
      "\u2028",
      "\ufe0f",
      String.fromCodePoint(0xe0041),
    ];
    for (const blank of hidden) {
      const { text } = shownCall({ command: `ls ${blank.repeat(300)}; touch HIDDEN` });
      expect(text).not.toContain(blank);
      const code = blank.codePointAt(0)!;
      const shown =
        code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;
      expect(text).toContain(shown);
      expect(text).toContain("; touch HIDDEN");
    }
    // Letters of other scripts stay as they are.
    expect(printable("한국어 ⠁⠃ café")).toBe("한국어 ⠁⠃ café");
  });

  it("printable keeps line feeds and tabs unless asked not to", () => {
    expect(printable("a\nb\tc\x1b")).toBe("a\nb\tc\\u001b");
    expect(printable("a\nb", false)).toBe("a\\u000ab");
  });
});
