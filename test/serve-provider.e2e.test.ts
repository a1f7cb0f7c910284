// `keel serve --stdio --provider …` chooses the model as `keel run` does (cli/provider.ts): the
// same names with the same meaning, the same environment, the same error without a key. Each
// provider runs a tool-using session through a real server child against a loopback server
// that speaks its wire; the assertions are on what that server received.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PROVIDER_ENV } from "../cli/provider.ts";
import {
  type FakeOpenAIServer,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import {
  anthropicWire,
  geminiWire,
  openaiResponsesWire,
  type Wire,
} from "./support/provider-wires.ts";
import { type RawServer, responseTo, spawnServer, weatherTool } from "./support/serve-child.ts";

/** Every variable a provider reads, emptied (an empty value counts as unset). */
const CLEAN: Record<string, string> = Object.fromEntries(
  [
    ...Object.values(PROVIDER_ENV).flatMap((v) => [v.key, v.baseURL]),
    "KEEL_PROVIDER",
    "KEEL_MODEL",
    "KEEL_CONTEXT_WINDOW",
  ].map((k) => [k, ""]),
);

let fake: FakeOpenAIServer;
beforeEach(async () => {
  fake = await startFakeOpenAIServer();
});
afterEach(async () => {
  await fake.close();
});

/** Opens a session with the client tool, prompts, answers its tool.execute, awaits the turn. */
async function weatherTurn(server: RawServer) {
  await server.waitFor((f) => f.type === "hello", "the server's hello");
  server.send({ type: "hello", protocol: "1.0" });
  server.send({ type: "session.open", id: "open", sessionId: "w", tools: [weatherTool] });
  server.send({ type: "prompt", id: "go", sessionId: "w", text: "Weather in Lisbon?" });
  const exec = (await server.waitFor((f) => f.type === "tool.execute", "tool.execute")) as {
    id: string;
    args: unknown;
  };
  expect(exec.args).toEqual({ city: "Lisbon" });
  server.send({ type: "ok", id: exec.id, result: "sunny, 24 °C" });
  const done = await server.waitFor(responseTo("go"), "the prompt's response");
  server.child.stdin.end();
  expect(await server.exited).toEqual({ code: 0, signal: null });
  return done;
}

const providers: {
  name: string;
  wire: Wire;
  /** How the provider is chosen: the flag, or KEEL_PROVIDER. */
  choose: "flag" | "env";
  url: string;
  auth: [header: string, value: string];
}[] = [
  {
    name: "anthropic",
    wire: anthropicWire,
    choose: "flag",
    url: "/v1/messages",
    auth: ["x-api-key", "test-key"],
  },
  {
    name: "openai",
    wire: openaiResponsesWire,
    choose: "flag",
    url: "/v1/responses",
    auth: ["authorization", "Bearer test-key"],
  },
  {
    name: "google",
    wire: geminiWire,
    choose: "env",
    url: "/v1/models/loopback-model:streamGenerateContent?alt=sse",
    auth: ["x-goog-api-key", "test-key"],
  },
];

describe("keel serve --provider: the providers of keel run", () => {
  for (const p of providers) {
    it(`${p.choose === "flag" ? `--provider ${p.name}` : `KEEL_PROVIDER=${p.name}`} speaks ${p.url} from its key and base URL, with the client tool's result paired to its call`, async () => {
      const call = { id: "call_lis", name: "get_weather", args: '{"city":"Lisbon"}' };
      fake.enqueue(
        p.wire.calls([call], { text: "checking", token: "sig-1" }),
        p.wire.text("Sunny in Lisbon."),
      );
      const vars = PROVIDER_ENV[p.name as keyof typeof PROVIDER_ENV];
      const server = spawnServer(
        ["--store", "memory", ...(p.choose === "flag" ? ["--provider", p.name] : [])],
        {
          ...CLEAN,
          [vars.key]: "test-key",
          [vars.baseURL]: fake.baseURL,
          KEEL_MODEL: "loopback-model",
          KEEL_CONTEXT_WINDOW: "32768",
          ...(p.choose === "env" ? { KEEL_PROVIDER: p.name } : {}),
        },
      );
      expect(await weatherTurn(server)).toMatchObject({
        type: "ok",
        result: { status: "completed" },
      });
      expect(fake.requests.map((r) => r.url)).toEqual([p.url, p.url]);
      expect(fake.requests[0].headers[p.auth[0]]).toBe(p.auth[1]);
      expect(p.wire.toolResults(fake.requests[1].body)).toEqual([
        { ref: p.wire.ref(call), content: "sunny, 24 °C" },
      ]);
      expect(server.stderr()).toBe("");
    });
  }

  it("without --provider it is openai-compatible (Chat Completions) from OPENAI_BASE_URL", async () => {
    fake.enqueue(
      streamReply({
        calls: [{ id: "call_lis", name: "get_weather", args: '{"city":"Lisbon"}' }],
      }),
      streamReply({ text: "Sunny in Lisbon." }),
    );
    const server = spawnServer(["--store", "memory"], {
      ...CLEAN,
      OPENAI_BASE_URL: fake.baseURL,
      KEEL_MODEL: "loopback-model",
      KEEL_CONTEXT_WINDOW: "32768",
    });
    expect(await weatherTurn(server)).toMatchObject({ result: { status: "completed" } });
    expect(fake.requests.map((r) => r.url)).toEqual([
      "/v1/chat/completions",
      "/v1/chat/completions",
    ]);
    expect(fake.requests[1].body.messages?.at(-1)).toMatchObject({
      role: "tool",
      tool_call_id: "call_lis",
      content: "sunny, 24 °C",
    });
  });

  it("without its key a provider exits 3 before any frame, naming the variable to set", async () => {
    for (const name of ["anthropic", "openai", "google"] as const) {
      const server = spawnServer(["--store", "memory", "--provider", name], CLEAN);
      expect(await server.exited).toEqual({ code: 3, signal: null });
      expect(server.stderr()).toContain(`${PROVIDER_ENV[name].key} is not set`);
      expect(server.frames).toEqual([]);
    }
    expect(fake.requests).toEqual([]);
  });

  it("an unknown provider is a usage error listing every choice, scripted included", async () => {
    const server = spawnServer(["--store", "memory", "--provider", "bedrock"], CLEAN);
    expect(await server.exited).toEqual({ code: 2, signal: null });
    expect(server.stderr()).toContain(
      'unknown provider "bedrock": use --provider openai-compatible | openai | anthropic | google (or KEEL_PROVIDER), or --provider scripted --script <file.json>',
    );
  });
});
