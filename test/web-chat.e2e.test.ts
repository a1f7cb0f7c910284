// The example chat page (examples/web: the AI SDK's useChat, default transport) in headless
// Chromium against a real `keel serve --http` process and a loopback OpenAI-compatible model
// server: text streams in; a reload mid-stream resumes the message without a gap or a repeat;
// a high-risk tool call runs after a click on Approve; Stop interrupts the turn (the model
// request is cut, the log ends the turn `cancelled`).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CHROMIUM_ARGS, describeInChromium } from "./support/chromium.ts";
import {
  chunk,
  type FakeOpenAIServer,
  type FakeStep,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import { type HttpChild, startHttpChild } from "./support/http-child.ts";

const ROOT = join(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "keel-web-"));
let fake: FakeOpenAIServer;
let server: HttpChild;
let browser: Browser;
let page: Page;
let url: string;

const sse = (delta: Record<string, unknown>, finish: string | null = null): FakeStep => ({
  type: "sse",
  data: chunk(delta, finish),
});
const DONE: FakeStep[] = [{ type: "raw", text: "data: [DONE]\n\n" }, { type: "end" }];

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const assistantTexts = () =>
  page.$$eval('[data-role="assistant"] [data-testid="text"]', (els) =>
    els.map((e) => e.textContent),
  );
const status = () => page.textContent('[data-testid="status"]');

async function send(text: string) {
  await page.fill('[data-testid="prompt"]', text);
  await page.click('[data-testid="send"]');
}

describeInChromium("the example chat page on keel serve --http", (executablePath) => {
  beforeAll(async () => {
    execFileSync(process.execPath, [join(ROOT, "examples/web/build.mjs")], { stdio: "pipe" });
    fake = await startFakeOpenAIServer();
    server = await startHttpChild(
      ["--store", "memory", "--static", join(ROOT, "examples/web/dist")],
      dir,
      {
        KEEL_PROVIDER: "openai-compatible",
        OPENAI_BASE_URL: fake.baseURL,
        OPENAI_API_KEY: "test-key",
        KEEL_MODEL: "test-model",
        KEEL_CONTEXT_WINDOW: "32768",
      },
    );
    url = `${server.origin}/?chat=web1#token=${server.token}`;
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
    page = await browser.newPage();
    await page.goto(url);
    await page.waitForSelector('[data-testid="prompt"]');
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("streams text in, and a reload mid-stream resumes it without a gap or a repeat", async () => {
    const gate = deferred();
    fake.enqueue([
      sse({ role: "assistant", content: "" }),
      sse({ content: "Hello, " }),
      sse({ content: "I am " }),
      { type: "gate", until: gate.promise },
      sse({ content: "Keel." }),
      sse({}, "stop"),
      ...DONE,
    ]);
    await send("hello");
    await page.waitForFunction(
      () =>
        document.querySelector('[data-role="assistant"] [data-testid="text"]')?.textContent ===
        "Hello, I am ",
    );
    expect(await status()).toBe("streaming");
    await page.reload();
    await page.waitForFunction(
      () =>
        document.querySelector('[data-role="assistant"] [data-testid="text"]')?.textContent ===
        "Hello, I am ",
    );
    expect(await page.$$eval('[data-role="user"]', (els) => els.map((e) => e.textContent))).toEqual(
      ["hello"],
    );
    gate.resolve();
    await page.waitForFunction(
      () => document.querySelector('[data-testid="status"]')?.textContent === "ready",
    );
    expect(await assistantTexts()).toEqual(["Hello, I am Keel."]);
    expect(await page.$$eval('[data-role="assistant"]', (els) => els.length)).toBe(1);
  });

  it("runs a high-risk tool call after a click on Approve", async () => {
    fake.enqueue(
      streamReply({
        calls: [{ id: "call_sh", name: "shell", args: '{"command":"echo approved-by-click"}' }],
      }),
      streamReply({ text: "The command printed approved-by-click." }),
    );
    await send("run it");
    await page.waitForSelector('[data-testid="approve"]');
    expect(fake.requests).toHaveLength(2);
    await page.click('[data-testid="approve"]');
    await page.waitForSelector('[data-testid="output"]');
    expect(await page.textContent('[data-testid="output"]')).toMatch(/approved-by-click/);
    await page.waitForFunction(() =>
      Array.from(document.querySelectorAll('[data-testid="text"]')).some(
        (e) => e.textContent === "The command printed approved-by-click.",
      ),
    );
    const toolResult = fake.requests[2].body.messages!.find((m) => m.role === "tool");
    expect(String(toolResult?.content)).toMatch(/approved-by-click/);
  });

  it("Stop interrupts the turn: the model request is cut and the turn ends cancelled", async () => {
    fake.enqueue([
      sse({ role: "assistant", content: "" }),
      sse({ content: "This will take a while" }),
      { type: "hang" },
    ]);
    await send("tell me a long story");
    await page.waitForFunction(() =>
      Array.from(document.querySelectorAll('[data-testid="text"]')).some(
        (e) => e.textContent === "This will take a while",
      ),
    );
    await page.click('[data-testid="stop"]');
    await page.waitForFunction(
      () => document.querySelector('[data-testid="status"]')?.textContent === "ready",
    );
    const auth = { authorization: `Bearer ${server.token}` };
    await expect
      .poll(async () => {
        const { entries } = await (
          await fetch(`${server.api}/sessions/web1/entries`, { headers: auth })
        ).json();
        return entries.filter((e: { type: string }) => e.type === "turn_end").at(-1)?.status;
      })
      .toBe("cancelled");
    await expect.poll(() => fake.requests.at(-1)?.aborted).toBe(true);
  });
});
