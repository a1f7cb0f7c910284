import { existsSync } from "node:fs";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { withApproval } from "../cli/approval.ts";
import { main } from "../cli/main.ts";
import { renderTree } from "../cli/show-format.ts";
import { createTrace } from "../cli/trace.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { ToolResult } from "../contracts/tool-result.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import type { ToolContext } from "../tools/types.ts";

const ev = (body: Record<string, unknown>, at = 1000): AgentEvent =>
  ({ sessionId: "s", at, ...body }) as AgentEvent;

function sink(isTTY: boolean) {
  const chunks: string[] = [];
  return {
    out: { isTTY, columns: 100, write: (c: string) => chunks.push(c) },
    text: () => chunks.join(""),
  };
}

describe("the trace", () => {
  const events = [
    ev({ type: "turn.started", turnId: "t", input: "do it" }),
    ev({ type: "attempt.started", turnId: "t", attemptId: "a", step: 2 }),
    ev({
      type: "message.committed",
      turnId: "t",
      attemptId: "a",
      text: "ok",
      toolCalls: [],
      usage: { inputTokens: 1500, outputTokens: 20 },
    }),
    ev(
      { type: "call.started", turnId: "t", callId: "c", name: "read_file", args: { path: "a" } },
      1000,
    ),
    ev({
      type: "retry.scheduled",
      turnId: "t",
      attemptId: "a",
      retry: 1,
      delayMs: 60_000,
      readyAt: 61_000,
      reason: "429",
      mode: "retry",
    }),
  ];

  it("on a TTY redraws a status line with the model request, tokens, running calls and the retry countdown", () => {
    const { out, text } = sink(true);
    const trace = createTrace({ out, now: () => 1000, color: false });
    for (const e of events) trace.onEvent(e);
    const status = text().split("\r").at(-1)!;
    expect(status).toContain("request 1");
    expect(status).toContain("1500↑ 20↓ tok");
    expect(status).toContain("running read_file");
    expect(status).toContain("retry in 60.0s");
    trace.finish({});
    expect(text().endsWith("\x1b[2K")).toBe(true);
  });

  it("without a TTY prints plain lines: no escape codes, no carriage returns", () => {
    const { out, text } = sink(false);
    const trace = createTrace({ out });
    for (const e of events) trace.onEvent(e);
    trace.onEvent(
      ev(
        {
          type: "call.settled",
          turnId: "t",
          callId: "c",
          name: "read_file",
          outcome: "completed",
          result: { ok: true, content: "1\thello\n2\tworld" },
        },
        1012,
      ),
    );
    trace.finish({ type: "result" });
    expect(text()).not.toMatch(/[\r\x1b]/);
    expect(text()).toContain("✓ read_file 12 ms completed  1\thello (+1 lines)");
    expect(text()).toContain("↻ retry #1 in 60.0 s — 429");
  });

  it("a steer's line names the lane as the docs do and shows what was said", () => {
    const { out, text } = sink(false);
    const said: Record<string, string> = { in_1: "Keep the fix minimal:\nchange only the typo." };
    const trace = createTrace({ out, inboxText: (id) => said[id] });
    trace.onEvent(
      ev({ type: "inbox.received", inboxId: "in_1", lane: "next-step", source: "user" }),
    );
    trace.onEvent(
      ev({ type: "inbox.received", inboxId: "in_2", lane: "interrupt", source: "user" }),
    );
    expect(text()).toContain(
      "✉ steer received (user): Keep the fix minimal: change only the typo.",
    );
    expect(text()).toContain("✉ interrupt received (user)\n");
    expect(text()).not.toContain("next-step");
  });

  it("the retry line gives the count and the wait once, then why", () => {
    const { out, text } = sink(false);
    const trace = createTrace({ out });
    trace.onEvent(
      ev({
        type: "retry.scheduled",
        turnId: "t",
        attemptId: "a",
        retry: 1,
        delayMs: 1000,
        readyAt: 2000,
        reason:
          "rate limited by the provider (HTTP 429: slow down); retry 1/2 in 1000 ms (provider's Retry-After)",
        mode: "retry",
      }),
    );
    const line = text().trim();
    expect(line).toBe(
      "↻ retry 1 of 2 in 1.0 s (provider's Retry-After) — rate limited by the provider (HTTP 429: slow down)",
    );
    expect(line.match(/retry/g)).toHaveLength(1);
  });

  it("a result's first line is cut at a word, with an ellipsis, never mid-word", () => {
    const { out, text } = sink(false);
    const trace = createTrace({ out });
    const message =
      "not executed: the user denied shell for this session; ask the user to run the command themselves, or explain why it is needed";
    trace.onEvent(
      ev({
        type: "call.settled",
        turnId: "t",
        callId: "c",
        name: "shell",
        outcome: "not_executed",
        result: { ok: false, code: "DENIED", message, retryable: false },
      }),
    );
    const shown = /DENIED: (.*)$/m.exec(text())?.[1] ?? "";
    expect(shown.endsWith("…")).toBe(true);
    const kept = shown.slice(0, -1);
    expect(`DENIED: ${message}`.startsWith(`DENIED: ${kept}`)).toBe(true);
    // The cut falls before a space of the message: the last word shown is whole.
    expect(message[kept.length]).toBe(" ");
  });

  it("the status line's context figure says when it is an estimate and how much is kept for the answer", () => {
    const { out, text } = sink(true);
    const trace = createTrace({ out, now: () => 0, color: false });
    trace.onEvent(
      ev({
        type: "context.measured",
        used: 1000,
        window: 100_000,
        reserve: 25_000,
        trusted: false,
      }),
    );
    trace.onEvent(ev({ type: "attempt.started", turnId: "t", attemptId: "a", step: 0 }));
    expect(text().split("\r").at(-1)).toContain("context ≈1% of 100000 (+25% reserved)");
    trace.onEvent(
      ev({
        type: "context.measured",
        used: 30_000,
        window: 100_000,
        reserve: 25_000,
        trusted: true,
      }),
    );
    trace.onEvent(ev({ type: "attempt.started", turnId: "t", attemptId: "b", step: 1 }));
    expect(text().split("\r").at(-1)).toContain("context 30% of 100000 (+25% reserved)");
    trace.finish({});
  });

  it("the turn's last line counts model requests, a retry included, in the singular and the plural", () => {
    const turn = (attempts: number) => {
      const { out, text } = sink(false);
      const trace = createTrace({ out, now: () => 0 });
      trace.onEvent(ev({ type: "turn.started", turnId: "t", input: "go" }));
      for (let i = 0; i < attempts; i++) {
        // Step numbers repeat on a retry: the count is of requests, not of step numbers.
        trace.onEvent(ev({ type: "attempt.started", turnId: "t", attemptId: `a${i}`, step: 0 }));
      }
      trace.onEvent(ev({ type: "turn.ended", turnId: "t", status: "completed" }));
      return text().trim().split("\n").at(-1)!;
    };
    expect(turn(0)).toContain("· 0 model requests ·");
    expect(turn(1)).toContain("· 1 model request ·");
    expect(turn(2)).toContain("· 2 model requests ·");
    expect(turn(1)).not.toMatch(/\bsteps?\b/);
  });

  it("counts each turn's requests from zero (a resumed session's turn starts again)", () => {
    const { out, text } = sink(false);
    const trace = createTrace({ out, now: () => 0 });
    for (const turnId of ["t1", "t2"]) {
      trace.onEvent(ev({ type: "turn.started", turnId, input: "go" }));
      trace.onEvent(ev({ type: "attempt.started", turnId, attemptId: "a", step: 0 }));
      trace.onEvent(ev({ type: "turn.ended", turnId, status: "completed" }));
    }
    expect(text().match(/· 1 model request ·/g)).toHaveLength(2);
  });

  it("shows each acceptance round of a session's loop: the checks it runs with their marks (an opinion labelled), the follow-up sent, and the verdict with its counts and artifact", async () => {
    const { out, text } = sink(false);
    const trace = createTrace({ out, now: () => 0 });
    let version = "v1";
    let requests = 0;
    const agent = createAgent({
      model: scriptedModel(() => {
        if (++requests === 2) version = "v2"; // the follow-up turn changes the artifact
        return { text: `try ${requests}` };
      }),
      acceptance: {
        artifact: () => version,
        until: "passed",
        maxRounds: 2,
        checks: [
          { name: "tests", run: ({ artifactVersion }) => ({ passed: artifactVersion === "v2" }) },
          { name: "judge", kind: "opinion", run: () => ({ passed: true, output: "looks done" }) },
        ],
      },
    });
    const session = await agent.openSession();
    session.subscribe((e) => trace.onEvent(e));
    await session.prompt("fix it");
    await agent.close();
    const lines = text()
      .split("\n")
      .filter((l) => /^ *[⚖✓✗↺✔✘…] /.test(l) && !l.includes("turn completed"))
      .map((l) => l.replace(/ [\d.]+ ms$/, " <t> ms"));
    expect(lines).toEqual([
      "  ⚖ acceptance round 0: tests, judge",
      "    ✗ tests <t> ms",
      "    ✓ judge (opinion, not evidence) <t> ms",
      "  ↺ follow-up 1: failing tests sent to the model",
      "  ⚖ acceptance round 1: tests, judge",
      "    ✓ tests <t> ms",
      "    ✓ judge (opinion, not evidence) <t> ms",
      "✔ acceptance passed · 1/1 checks passed · 1 follow-up(s) · artifact v2",
    ]);
  });

  it("--json prints each event as one JSON line and the result last", () => {
    const { out, text } = sink(true);
    const trace = createTrace({ out, json: true });
    for (const e of events) trace.onEvent(e);
    trace.line("not printed in json mode");
    trace.finish({ type: "result", status: "completed" });
    const lines = text()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.type)).toEqual([...events.map((e) => e.type), "result"]);
  });
});

describe("approval of high-risk tools", () => {
  const ran: string[] = [];
  const tool = (name: string, risk?: "low" | "high") =>
    defineTool({
      name,
      description: name,
      parameters: z.object({ x: z.number() }),
      ...(risk ? { traits: { risk } } : {}),
      execute: ({ x }) => {
        ran.push(`${name}:${x}`);
        return "done";
      },
    });
  const ctx = (signal = new AbortController().signal) => ({ signal }) as unknown as ToolContext;
  const run = async (
    t: { execute: (a: unknown, c: ToolContext) => unknown },
    x: number,
    c = ctx(),
  ) => (await t.execute({ x }, c)) as ToolResult | string;

  it("denies high-risk (and undeclared-risk) tools without a terminal, and leaves low-risk ones alone", async () => {
    ran.length = 0;
    const [shell, unknownRisk, read] = withApproval(
      [tool("sh", "high"), tool("mystery"), tool("read", "low")],
      {},
    );
    expect(await run(shell, 1)).toMatchObject({ ok: false, code: "DENIED" });
    expect(await run(unknownRisk, 2)).toMatchObject({ ok: false, code: "DENIED" });
    expect(await run(read, 3)).toBe("done");
    expect(ran).toEqual(["read:3"]);
  });

  it("asks one question at a time and runs only what was allowed", async () => {
    ran.length = 0;
    const asked: string[] = [];
    let open = 0;
    let maxOpen = 0;
    const answers = [true, false];
    const [shell] = withApproval([tool("sh", "high")], {
      ask: async (question) => {
        asked.push(question);
        maxOpen = Math.max(maxOpen, ++open);
        await new Promise((r) => setImmediate(r));
        open--;
        return answers.shift()!;
      },
    });
    const results = await Promise.all([run(shell, 1), run(shell, 2)]);
    expect(maxOpen).toBe(1);
    expect(asked[0]).toMatch(/^Allow sh \{"x":1\}\? \[y\/N\] $/);
    expect(results[0]).toBe("done");
    expect(results[1]).toMatchObject({ code: "DENIED" });
    expect(ran).toEqual(["sh:1"]);
  });

  it("--yes allows everything without asking; an aborted call is denied without asking", async () => {
    ran.length = 0;
    const [allowed] = withApproval([tool("sh", "high")], { yes: true });
    expect(await run(allowed, 1)).toBe("done");
    let asked = 0;
    const [guarded] = withApproval([tool("sh", "high")], {
      ask: async () => {
        asked++;
        return true;
      },
    });
    const controller = new AbortController();
    controller.abort();
    expect(await run(guarded, 2, ctx(controller.signal))).toMatchObject({ code: "DENIED" });
    expect(asked).toBe(0);
    expect(ran).toEqual(["sh:1"]);
  });
});

describe("--store memory", () => {
  /** Runs `keel` in this process, capturing what it writes. */
  async function keel(argv: string[]) {
    const written = { stdout: "", stderr: "" };
    const out = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      written.stdout += String(chunk);
      return true;
    });
    const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      written.stderr += String(chunk);
      return true;
    });
    try {
      return { code: await main(argv), ...written };
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  }

  it("sessions says the memory store keeps nothing (and --json gives []) instead of opening a file named memory", async () => {
    const human = await keel(["sessions", "--store", "memory"]);
    expect(human).toMatchObject({ code: 0, stderr: "" });
    expect(human.stdout).toContain("--store memory keeps nothing between commands");
    expect(await keel(["sessions", "--json", "--store", "memory"])).toMatchObject({
      code: 0,
      stdout: "[]\n",
    });
    expect(existsSync("memory")).toBe(false);
  });

  it("show, resume and inspect --replay refuse it with one line saying why, exit code 2", async () => {
    for (const args of [
      ["show", "s1"],
      ["resume", "s1", "again"],
      ["inspect", "--replay", "s1"],
    ]) {
      const r = await keel([...args, "--store", "memory"]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr.trim().split("\n")).toEqual([
        expect.stringContaining("--store memory keeps nothing between commands"),
      ]);
    }
    expect(existsSync("memory")).toBe(false);
  });

  it("every command documents it in --help", async () => {
    for (const command of ["demo", "run", "resume", "sessions", "show", "inspect"]) {
      const r = await keel([command, "--help"]);
      expect(r.stdout.replace(/\s+/g, " "), command).toContain('"memory" keeps nothing');
    }
  });
});

describe("the branch tree of keel show", () => {
  it("draws a fork as two branches and marks the active path", () => {
    const e = (id: string, parentId: string | null, seq: number, body: Record<string, unknown>) =>
      ({ id, parentId, seq, at: seq, ...body }) as LogEntry;
    const entries = [
      e("u1", null, 0, { type: "user_message", text: "first" }),
      e("u2", "u1", 1, { type: "user_message", text: "old branch" }),
      e("l", "u2", 2, { type: "leaf", leafId: "u1", reason: "rollback" }),
      e("u3", "u1", 3, { type: "user_message", text: "new branch" }),
    ];
    expect(renderTree(entries, "u3")).toBe(
      [
        '0 ● user "first"',
        '1 ├─ ○ user "old branch"',
        "2 │  ○ leaf → u1 (rollback)",
        '3 └─ ● user "new branch"',
      ].join("\n"),
    );
  });
});
