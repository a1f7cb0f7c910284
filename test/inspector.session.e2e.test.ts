import { mkdirSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { z } from "zod";
import { runDemo } from "../cli/demo.ts";
import { createAgent, defineTool, scriptedModel } from "../index.ts";
import { startInspector } from "../inspector/server.ts";
import { CHROMIUM_ARGS, describeInChromium } from "./support/chromium.ts";

// The inspector fed by real Keel sessions (the runtime's own actors and events).

let browser: Browser;

describeInChromium("inspector watching real sessions in headless Chromium", (executablePath) => {
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("draws a real session: an exclusive call waits queued, then starts, then settles", async () => {
    const live = await startInspector();
    const livePage = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    const gates = new Map<string, () => void>();
    const started = new Map<string, Promise<void>>();
    const slow = defineTool({
      name: "slow_write",
      description: "writes slowly (not concurrency-safe: runs alone)",
      parameters: z.object({ name: z.string() }),
      traits: { concurrencySafe: false, risk: "low" },
      execute: ({ name }) =>
        new Promise<string>((resolve) => {
          gates.set(name, () => resolve(`wrote ${name}`));
        }),
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "call_one", name: "slow_write", arguments: '{"name":"one"}' },
          { id: "call_two", name: "slow_write", arguments: '{"name":"two"}' },
        ],
        usage: { inputTokens: 300, outputTokens: 20 },
      },
      { text: "both written", usage: { inputTokens: 340, outputTokens: 5 } },
    ]);
    const agent = createAgent({ model, tools: [slow], inspect: live.sink });
    try {
      await livePage.goto(live.url);
      const session = agent.session("sess_live");
      const waitGate = (name: string) => {
        let promise = started.get(name);
        if (!promise) {
          promise = new Promise<void>((resolve) => {
            const poll = () => (gates.has(name) ? resolve() : setImmediate(poll));
            poll();
          });
          started.set(name, promise);
        }
        return promise;
      };
      const done = session.prompt("write one and two");
      await waitGate("one");
      const one = '[data-testid="timeline"] [data-call-id="call_one"]';
      const two = '[data-testid="timeline"] [data-call-id="call_two"]';
      await livePage.waitForSelector(`${one}[data-state="started"]`);
      await livePage.waitForSelector(`${two}[data-state="queued"]`);
      await livePage.waitForSelector(
        '[data-testid="actor-tree"] [data-actor-id="sess_live"] [data-actor-id="call_two"][data-state="queued"]',
      );
      gates.get("one")!();
      await waitGate("two");
      await livePage.waitForSelector(`${one}[data-state="settled"]`);
      await livePage.waitForSelector(`${two}[data-state="started"]`);
      gates.get("two")!();
      expect((await done).status).toBe("completed");
      await livePage.waitForSelector(`${two}[data-state="settled"][data-outcome="completed"]`);
      const turnState = await livePage.getAttribute(
        '[data-testid="actor-tree"] [data-kind="turn"]',
        "data-state",
      );
      expect(turnState).toBe("done");
      mkdirSync("test-output", { recursive: true });
      await livePage.screenshot({ path: "test-output/inspector-live.png" });
    } finally {
      await agent.close();
      await livePage.close();
      await live.close();
    }
  });
  it("shows the whole demo session live: retry countdown, refused calls, every bar settled", async () => {
    const demoPage = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    let shot: Promise<unknown> = Promise.resolve();
    try {
      const code = await runDemo({
        inspect: true,
        store: "memory", // the default would be the clone's own .keel/keel.db
        out: { write: () => true },
        onInspector: async (url) => {
          await demoPage.goto(url);
          shot = demoPage
            .waitForSelector('[data-testid="retry-waits"] [data-retry-state="waiting"]')
            .then(() => {
              mkdirSync("test-output", { recursive: true });
              return demoPage.screenshot({ path: "test-output/inspector.png" });
            });
        },
        keepOpen: async () => {
          await shot;
          await demoPage.waitForSelector(
            '[data-testid="actor-tree"] [data-kind="turn"][data-state="done"]',
          );
        },
      });
      expect(code).toBe(0);
      const bars = await demoPage.$$eval('[data-testid="timeline"] [data-call-id]', (els) =>
        els.map((el) => `${el.getAttribute("data-call-id")}:${el.getAttribute("data-outcome")}`),
      );
      expect(bars).toEqual([
        "call_ls:completed",
        "call_greet:completed",
        "call_readme:completed",
        "call_fetch:not_executed",
        "call_grep:completed",
        "call_edit_cut:not_executed",
        "call_edit:completed",
      ]);
      await demoPage.waitForSelector('[data-testid="retry-waits"] [data-retry-state="done"]');
    } finally {
      await demoPage.close();
    }
  });
});
