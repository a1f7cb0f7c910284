// The server over in-memory streams (real Node streams, no mock): when the client stops reading,
// the sessions' model streams stop being read and output stays bounded; text.streamed frames,
// and only they, are merged while they wait.
import { PassThrough } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { serve } from "../cli/serve/server.ts";
import type { ServerFrame } from "../contracts/protocol.ts";
import { type Model, memoryStore, scriptedModel } from "../index.ts";

const TEXT = "abcdefghij".repeat(4000); // 40 000 chars in 4 000 chunks

describe("keel serve backpressure", () => {
  it("stops reading the model stream while stdout is not draining, then delivers every piece of text", async () => {
    let pulled = 0;
    const model = (): Model => {
      const inner = scriptedModel([{ text: TEXT, chunkSize: 10 }]);
      return {
        name: "counting",
        async *stream(request) {
          for await (const event of inner.stream(request)) {
            pulled++;
            yield event;
          }
        },
      };
    };
    const input = new PassThrough();
    const output = new PassThrough({ highWaterMark: 1024 });
    const bound = 16 * 1024;
    const server = serve({
      input,
      output,
      store: memoryStore(),
      model,
      logger: pino({ level: "silent" }),
      version: "test",
      maxBufferedBytes: bound,
    });
    const send = (frame: object) => input.write(`${JSON.stringify(frame)}\n`);
    send({ type: "hello", protocol: "1.0" });
    send({ type: "session.open", id: 1, sessionId: "s" });
    send({ type: "subscribe", id: 2, sessionId: "s", events: ["text.streamed", "turn.ended"] });
    send({ type: "prompt", id: 3, sessionId: "s", text: "talk" });
    await new Promise((resolve) => setTimeout(resolve, 400));
    // Nobody reads `output`: the stream stopped being read well before its end.
    expect(pulled).toBeGreaterThan(0);
    expect(pulled).toBeLessThan(TEXT.length / 10 / 2);
    expect(server.writer.buffered).toBeLessThan(bound + 1024);
    const stalledAt = pulled;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(pulled).toBe(stalledAt);

    // The client reads again: the turn finishes and no text is lost.
    const frames: ServerFrame[] = [];
    let buffer = "";
    const answered = new Promise<void>((resolve) => {
      output.on("data", (chunk: Buffer) => {
        buffer += chunk.toString("utf8");
        const lines = buffer.split("\n");
        buffer = lines.pop() ?? "";
        for (const line of lines) {
          const frame = JSON.parse(line) as ServerFrame;
          frames.push(frame);
          if (frame.type === "ok" && frame.id === 3) resolve();
        }
      });
    });
    await answered;
    const texts = frames.flatMap((f) =>
      f.type === "event" && f.event.type === "text.streamed" ? [f.event.text] : [],
    );
    expect(texts.join("")).toBe(TEXT);
    expect(server.writer.coalesced).toBeGreaterThan(0);
    expect(texts.length).toBe(TEXT.length / 10 - server.writer.coalesced);
    expect(frames.filter((f) => f.type === "event" && f.event.type === "turn.ended")).toHaveLength(
      1,
    );
    input.end();
    expect(await server.closed).toBe("stdin ended");
  });
});
