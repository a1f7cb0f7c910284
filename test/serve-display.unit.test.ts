// The protocol's permission.request carries what to show the person who approves (issue 27,
// finding 1 applied to serve): the whole call, spaces counted, controls escaped.
import { PassThrough } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { serve } from "../cli/serve/server.ts";
import type { ServerFrame } from "../contracts/protocol.ts";
import { memoryStore, scriptedModel } from "../index.ts";

describe("permission.request display", () => {
  it("shows `ls -la`, 320 spaces, `; touch HIDDEN` whole, the spaces as a count, with the note", async () => {
    const command = `ls -la${" ".repeat(320)}; touch HIDDEN\u001b[2J`;
    const input = new PassThrough();
    const output = new PassThrough();
    const frames: ServerFrame[] = [];
    let buffer = "";
    output.on("data", (c: Buffer) => {
      buffer += c.toString("utf8");
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const l of lines) frames.push(JSON.parse(l));
    });
    const server = serve({
      input,
      output,
      store: memoryStore(),
      model: () =>
        scriptedModel([
          { toolCalls: [{ id: "c1", name: "run", arguments: JSON.stringify({ command }) }] },
          { text: "done" },
        ]),
      logger: pino({ level: "silent" }),
      version: "t",
    });
    const send = (f: object) => input.write(`${JSON.stringify(f)}\n`);
    send({ type: "hello", protocol: "1.0" });
    send({
      type: "session.open",
      id: 1,
      sessionId: "s",
      tools: [
        {
          name: "run",
          description: "runs",
          parameters: { type: "object", properties: { command: { type: "string" } } },
          traits: { risk: "high" },
        },
      ],
      permissions: { defaults: { high: "ask" } },
    });
    send({ type: "prompt", id: 2, sessionId: "s", text: "go" });
    for (let i = 0; i < 100 && !frames.some((f) => f.type === "permission.request"); i++)
      await new Promise((r) => setTimeout(r, 20));
    const ask = frames.find((f) => f.type === "permission.request") as unknown as {
      id: string;
      display: string;
    };
    expect(ask.display).toContain("; touch HIDDEN");
    expect(ask.display).toContain("⟨320 spaces⟩");
    expect(ask.display).toMatch(/runs of whitespace are shown as/);
    expect(ask.display).not.toContain("\u001b");
    send({ type: "ok", id: ask.id, result: { type: "deny" } });
    await server.shutdown("test over");
  });
});
