import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { normalizeUserInput } from "../actors/user-input.ts";
import { openaiModel } from "../providers/openai-model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import {
  type FakeOpenAIServer,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
  "base64",
);

describe("user content parts", () => {
  it("a model that does not take images refuses prompt() and steer() with an image before any request, and logs nothing", async () => {
    const model = openaiModel({
      model: "text-only",
      baseURL: server.baseURL,
      images: false,
      contextWindow: 8192,
    });
    const session = createAgent({ model }).session("s");
    await session.ready;
    const input = [
      { type: "text" as const, text: "what is this?" },
      { type: "image" as const, image: PNG },
    ];
    await expect(session.prompt(input)).rejects.toThrow(
      /session\.prompt: the model "openai:text-only" does not take images/,
    );
    await expect(session.steer(input)).rejects.toThrow(/session\.steer: .*does not take images/);
    expect(server.requests).toHaveLength(0);
    expect(session.entries()).toHaveLength(0);
  });

  it("openaiModel sends an image URL and bytes as Chat image_url parts, and messages() shows them", async () => {
    server.enqueue(streamReply({ text: "two images" }));
    const session = createAgent({
      model: openaiModel({ model: "vision", baseURL: server.baseURL, contextWindow: 8192 }),
    }).session("s");
    const out = await session.prompt([
      { type: "text", text: "compare" },
      { type: "image", image: new URL("https://example.com/cat.jpg") },
      { type: "image", image: PNG },
    ]);
    expect(out.status).toBe("completed");
    const content = [
      { type: "text", text: "compare" },
      { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } },
      { type: "image_url", image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` } },
    ];
    expect(server.requests[0].body.messages?.[0]).toEqual({ role: "user", content });
    expect(session.messages()[0]).toEqual({ role: "user", content });
    expect(session.entries().find((e) => e.type === "user_message")).toMatchObject({
      text: "compare",
      parts: [
        { type: "text", text: "compare" },
        { type: "image", url: "https://example.com/cat.jpg" },
        { type: "image", base64: PNG.toString("base64"), mediaType: "image/png" },
      ],
    });
  });

  it("a steer with an image reaches the next request of the running turn", async () => {
    const model = scriptedModel([{ text: "first", delayMs: 20 }, { text: "saw it" }]);
    const session = createAgent({ model }).session("s");
    session.subscribe((e) => {
      if (e.type === "attempt.started" && e.step === 0)
        void session.steer([{ type: "image", image: "https://example.com/x.png" }]);
    });
    expect((await session.prompt("hi")).status).toBe("completed");
    expect(model.requests[1].history.at(-1)).toEqual({
      role: "user",
      content: [{ type: "image", url: "https://example.com/x.png" }],
    });
  });

  it("malformed input says what is wrong and how to fix it", () => {
    expect(() => normalizeUserInput("session.prompt", "")).toThrow(/input is empty/);
    expect(() => normalizeUserInput("session.prompt", [])).toThrow(/non-empty array of parts/);
    expect(() =>
      normalizeUserInput("session.prompt", [{ type: "image", image: "/tmp/cat.png" }]),
    ).toThrow(
      /part 0: image URL "\/tmp\/cat.png" is not http\(s\) or data:; pass the file's bytes/,
    );
    expect(() =>
      normalizeUserInput("session.prompt", [{ type: "image", image: new Uint8Array([1, 2, 3]) }]),
    ).toThrow(/cannot tell the image's format .* pass mediaType/);
    expect(() => normalizeUserInput("session.prompt", [{ type: "audio" } as never])).toThrow(
      /unknown part type "audio"; use "text" or "image"/,
    );
    expect(
      normalizeUserInput("x", [
        { type: "text", text: "a" },
        { type: "text", text: "b" },
      ]),
    ).toEqual({
      text: "ab",
    });
  });
});
