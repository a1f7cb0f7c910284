import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CliError } from "../cli/errors.ts";
import { modelFor, PROVIDER_ENV, PROVIDERS } from "../cli/provider.ts";
import { anthropicMessage } from "./support/anthropic-wire.ts";
import {
  type FakeOpenAIServer,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import { geminiReply } from "./support/gemini-wire.ts";
import { runKeel } from "./support/run-keel.ts";

const KEYS = [
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_BASE_URL",
  "GOOGLE_GENERATIVE_AI_API_KEY",
  "GOOGLE_GENERATIVE_AI_BASE_URL",
  "KEEL_PROVIDER",
  "KEEL_MODEL",
  "KEEL_CONTEXT_WINDOW",
];

const keel = (args: string[], cwd: string, env: Record<string, string> = {}) =>
  runKeel(args, { cwd, env, unset: KEYS });

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

describe("keel --provider", () => {
  it("without its key, each provider's error names the variable to set", () => {
    for (const p of PROVIDERS) {
      let error: unknown;
      try {
        modelFor(p, {});
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(CliError);
      expect((error as CliError).exitCode).toBe(3);
      expect((error as Error).message).toContain(`${PROVIDER_ENV[p].key} is not set`);
    }
    // A local OpenAI-compatible server needs no key; the others always do.
    expect(modelFor("openai-compatible", { OPENAI_BASE_URL: "http://127.0.0.1:1/v1" }).name).toBe(
      "openai:gpt-4.1-mini",
    );
    expect(() => modelFor("openai", { OPENAI_BASE_URL: "http://127.0.0.1:1/v1" })).toThrow(
      /OPENAI_API_KEY is not set/,
    );
  });

  it("an exported but empty OPENAI_API_KEY is no key: a local server's base URL is enough", () => {
    const saved = process.env.OPENAI_API_KEY;
    process.env.OPENAI_API_KEY = "";
    try {
      const env = { OPENAI_API_KEY: "", OPENAI_BASE_URL: "http://127.0.0.1:1/v1" };
      expect(modelFor("openai-compatible", env).name).toBe("openai:gpt-4.1-mini");
    } finally {
      if (saved === undefined) delete process.env.OPENAI_API_KEY;
      else process.env.OPENAI_API_KEY = saved;
    }
  });

  it("every provider's model has a context window: known for its family, KEEL_CONTEXT_WINDOW otherwise, a config error naming it when neither", () => {
    const keys = {
      OPENAI_API_KEY: "k",
      ANTHROPIC_API_KEY: "k",
      GOOGLE_GENERATIVE_AI_API_KEY: "k",
    };
    expect(modelFor("openai", keys).contextWindow).toBe(1_047_576); // gpt-4.1-mini
    expect(modelFor("anthropic", keys).contextWindow).toBe(200_000);
    expect(modelFor("google", keys).contextWindow).toBe(1_048_576);
    for (const p of PROVIDERS) {
      const env = { ...keys, KEEL_MODEL: "house-model", KEEL_CONTEXT_WINDOW: "32768" };
      expect(modelFor(p, env).contextWindow).toBe(32_768);
      expect(() => modelFor(p, { ...keys, KEEL_MODEL: "house-model" })).toThrow(
        /context window of model house-model is not known: export KEEL_CONTEXT_WINDOW/,
      );
    }
    expect(() => modelFor("anthropic", { ...keys, KEEL_CONTEXT_WINDOW: "lots" })).toThrow(
      /KEEL_CONTEXT_WINDOW must be a positive integer/,
    );
  });

  it("--provider openai (the Responses API) against a Chat Completions server fails after one request, in one line naming the provider to use", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "keel-prov-"));
    for (let i = 0; i < 3; i++)
      server.enqueue(streamReply({ text: "Hello from Chat Completions" }));
    const r = await keel(["run", "--provider", "openai", "--store", "memory", "say hi"], cwd, {
      OPENAI_API_KEY: "k",
      OPENAI_BASE_URL: server.baseURL,
    });
    expect(r.code).toBe(1);
    expect(server.requests).toHaveLength(1); // not retried: another request gets the same answer
    const out = `${r.stdout}${r.stderr}`.trim().split("\n");
    expect(out.length).toBeLessThan(10);
    const failed = out.find((l) => l.includes("turn failed"));
    expect(failed).toContain(
      "Received a Chat Completions stream while using the OpenAI Responses API",
    );
    expect(failed).toContain("--provider openai-compatible");
    expect(r.stdout).not.toContain("invalid_union");
  });

  it("an unknown provider is a usage error listing the choices", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "keel-prov-"));
    const run = await keel(["run", "--provider", "bedrock", "hi"], cwd);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      'unknown provider "bedrock": use --provider openai-compatible | openai | anthropic | google',
    );
  });

  it("runs a tool-using turn on Anthropic's wire from ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "keel-prov-"));
    writeFileSync(join(cwd, "notes.txt"), "one\ntwo\n");
    server.enqueue(
      anthropicMessage([
        { type: "tool_use", id: "toolu_1", name: "read_file", input: '{"path":"notes.txt"}' },
      ]),
      anthropicMessage([{ type: "text", text: "two lines" }]),
    );
    const run = await keel(["run", "--json", "--provider", "anthropic", "read notes.txt"], cwd, {
      ANTHROPIC_API_KEY: "sk-ant-test",
      ANTHROPIC_BASE_URL: server.baseURL,
      KEEL_MODEL: "claude-loopback",
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(server.requests.map((r) => r.url)).toEqual(["/v1/messages", "/v1/messages"]);
    expect(server.requests[0].headers["x-api-key"]).toBe("sk-ant-test");
    expect(server.requests[0].body.model).toBe("claude-loopback");
    const results = (server.requests[1].body.messages as { content: unknown }[])[2];
    expect(JSON.stringify(results)).toContain('"tool_use_id":"toolu_1"');
    expect(JSON.stringify(results)).toMatch(/1\\tone\\n.*2\\ttwo/);
  });

  it("KEEL_PROVIDER=google reads GOOGLE_GENERATIVE_AI_API_KEY and its base URL", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "keel-prov-"));
    server.enqueue(geminiReply([{ text: "hello" }]));
    const run = await keel(["run", "--json", "hi"], cwd, {
      KEEL_PROVIDER: "google",
      GOOGLE_GENERATIVE_AI_API_KEY: "g-test",
      GOOGLE_GENERATIVE_AI_BASE_URL: server.baseURL,
      KEEL_MODEL: "gemini-loopback",
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(server.requests[0].url).toBe("/v1/models/gemini-loopback:streamGenerateContent?alt=sse");
    expect(server.requests[0].headers["x-goog-api-key"]).toBe("g-test");
  });
});
