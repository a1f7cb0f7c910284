// The live statechart in headless Chromium: a real session (a 503 retried, a tool held open,
// then an answer) watched live and replayed from its store. At each point the test reads the
// DOM: which states of the drawn chart are lit, which transition is marked. The screenshot of
// the turn's chart goes to test-output/inspector-chart.png (docs/inspector-chart.png is a copy).
import { mkdirSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { z } from "zod";
import { createAgent, defineTool, memoryStore, scriptedModel } from "../index.ts";
import type { InspectRecord } from "../inspector/records.ts";
import { replayRecords } from "../inspector/replay.ts";
import { type Inspector, startInspector } from "../inspector/server.ts";
import { CHROMIUM_ARGS, describeInChromium } from "./support/chromium.ts";

let browser: Browser;
let inspector: Inspector;
let page: Page;
const store = memoryStore();
let release: () => void = () => {};
let held: Promise<void>;
let done: Promise<{ status: string }>;
let agent: ReturnType<typeof createAgent>;
const SESSION = "sess_chart";

const chart = '[data-testid="chart"]';
const litStates = () =>
  page.$$eval(`${chart} .cs.lit`, (els) => els.map((el) => el.getAttribute("data-state-path")));
const taken = () =>
  page.$$eval(`${chart} .ce.taken`, (els) =>
    els.map(
      (el) =>
        `${el.getAttribute("data-edge")} on ${el.querySelector("text.taken")?.getAttribute("data-event")}`,
    ),
  );
const waitLit = (path: string) =>
  page.waitForSelector(`${chart} [data-state-path="${path}"].lit`, { timeout: 10_000 });

/** The records a page gets: read through the inspector's own WebSocket. */
async function recordsOf(url: string): Promise<InspectRecord[]> {
  const ws = new WebSocket(url.replace("http://", "ws://").replace("/?", "/ws?"));
  const hello = await new Promise<{ records: InspectRecord[] }>((resolve, reject) => {
    ws.once("message", (data) => resolve(JSON.parse(String(data))));
    ws.once("error", reject);
  });
  ws.close();
  return hello.records;
}

/** Moves the scrubber to just after record `index`. */
async function scrubTo(index: number) {
  await page.evaluate((value) => {
    const input = document.getElementById("scrubber") as HTMLInputElement;
    input.value = String(value);
    input.dispatchEvent(new Event("input"));
  }, index + 1);
}

/** The id of the turn actor in `records`. */
const turnOf = (records: InspectRecord[]) => {
  const actor = records.find((r) => r.k === "actor" && r.machine === "turn");
  return actor?.k === "actor" ? actor.id : "";
};

const snapIndex = (records: InspectRecord[], id: string, state: string) =>
  records.findIndex((r) => r.k === "snap" && r.id === id && r.state === state);

describeInChromium("the live statechart in the inspector", (executablePath) => {
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
    inspector = await startInspector({ store });
    page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    let open: () => void = () => {};
    held = new Promise<void>((resolve) => {
      open = resolve;
    });
    const hold = defineTool({
      name: "hold",
      description: "returns when the test lets it",
      parameters: z.object({}),
      traits: { readOnly: true, concurrencySafe: true },
      execute: () =>
        new Promise<string>((resolve) => {
          release = () => resolve("released");
          open();
        }),
    });
    const model = scriptedModel([
      { error: { status: 503, message: "overloaded" } },
      { toolCalls: [{ id: "call_hold", name: "hold", arguments: "{}" }] },
      { text: "done" },
    ]);
    agent = createAgent({
      model,
      tools: [hold],
      store,
      inspect: inspector.sink,
      retry: { baseDelayMs: 20, maxDelayMs: 40 },
    });
    await page.goto(inspector.url);
    done = agent.session(SESSION).prompt("hold on");
    await held;
  }, 60_000);

  afterAll(async () => {
    release();
    await agent?.close();
    await browser?.close();
    await inspector?.close();
  });

  it("lights the turn's executing state while its tool runs, and marks attempt.done from sampling", async () => {
    // Nothing selected: the latest turn's chart is drawn, laid out by ELK on the server.
    await page.waitForSelector(`${chart}[data-chart="ready"][data-machine="turn"]`, {
      timeout: 30_000,
    });
    await waitLit("running.executing.running");
    expect((await litStates()).sort()).toEqual([
      "running",
      "running.executing",
      "running.executing.running",
    ]);
    expect(await taken()).toEqual(["running.sampling→running.executing on attempt.done"]);
    // Every state of the turn chart is drawn, with its transitions' labels.
    const drawn = await page.$$eval(`${chart} .cs`, (els) =>
      els.map((el) => el.getAttribute("data-state-path")),
    );
    expect(drawn).toEqual(
      expect.arrayContaining([
        "running.sampling.preparing",
        "running.compacting.summarizing",
        "running.sampling.streaming",
        "running.waiting",
        "running.gating",
        "running.refusing",
        "running.executing.stopping",
        "finalizing",
        "done",
      ]),
    );
    const labels = await page.$$eval(`${chart} .ce text`, (els) => els.map((el) => el.textContent));
    expect(labels).toEqual(
      expect.arrayContaining(["attempt.failed [canRetry]", "after retryDelay", "compact.due"]),
    );
    // The picture for the docs (docs/inspector-chart.png is a copy): the chart on the whole
    // page, fitted.
    mkdirSync("test-output", { recursive: true });
    await page.setViewportSize({ width: 1920, height: 1400 });
    await page.click("#chart-wide");
    await page.click("#chart-fit");
    await page.screenshot({ path: "test-output/inspector-chart.png" });
    await page.click("#chart-wide");
    await page.click("#chart-fit");
    await page.setViewportSize({ width: 1600, height: 1000 });
    // At full size in its panel, the chart scrolls to the lit state.
    await page.waitForFunction(() => {
      const el = document.querySelector(
        '[data-testid="chart"] [data-state-path="running.executing.running"]',
      );
      const r = el!.getBoundingClientRect();
      const c = document.querySelector('[data-testid="chart"]')!.getBoundingClientRect();
      return r.left >= c.left && r.right <= c.right && r.top >= c.top && r.bottom <= c.bottom;
    });
    await page.screenshot({ path: "test-output/inspector-chart-panel.png" });
  }, 60_000);

  it("draws the tool call's own chart when the call is clicked: started, entered on call.recorded", async () => {
    await page.click('[data-testid="actor-tree"] [data-actor-id="call_hold"] > .row');
    await page.waitForSelector(`${chart}[data-chart="ready"][data-machine="toolCall"]`, {
      timeout: 30_000,
    });
    expect(await litStates()).toEqual(["started"]);
    expect(await taken()).toEqual(["recording→started on call.recorded"]);
  }, 60_000);

  it("follows the scrubber live: back at the retry wait, waiting is lit; at the end, done", async () => {
    release();
    expect((await done).status).toBe("completed");
    await page.click('[data-testid="actor-tree"] [data-kind="turn"] > .row');
    await waitLit("done");
    expect(await taken()).toEqual(["finalizing→done on finalize.done"]);
    const records = await recordsOf(inspector.url);
    const turnId = turnOf(records);
    await scrubTo(snapIndex(records, turnId, "running.waiting"));
    await waitLit("running.waiting");
    expect((await litStates()).sort()).toEqual(["running", "running.waiting"]);
    expect(await taken()).toEqual(["running.sampling→running.waiting on attempt.failed"]);
    await scrubTo(snapIndex(records, turnId, "running.sampling.streaming"));
    await waitLit("running.sampling.streaming");
    // The request went out once the attempt's start was written (the write-ahead), which the
    // step's `prepare` did.
    expect(await taken()).toEqual([
      "running.sampling.preparing→running.sampling.streaming on attempt.recorded",
    ]);
  });

  it("follows the scrubber in a replay of the stored session as it followed it live: the same states lit, the same transitions marked", async () => {
    const points = ["running.waiting", "running.executing.running", "running.ending"];
    /** At each point: the lit states and the marked transition of the page on `records`. */
    const seen = async (records: InspectRecord[]) => {
      const turnId = turnOf(records);
      const out: [string[], string[]][] = [];
      for (const state of points) {
        await scrubTo(snapIndex(records, turnId, state));
        await waitLit(state);
        out.push([(await litStates()).sort() as string[], await taken()]);
      }
      return out;
    };
    await page.goto(inspector.url);
    await page.click('[data-testid="actor-tree"] [data-kind="turn"] > .row');
    await page.waitForSelector(`${chart}[data-chart="ready"][data-machine="turn"]`);
    const live = await seen(await recordsOf(inspector.url));
    const entries = await store.load(SESSION);
    const { records } = await replayRecords(entries, SESSION);
    await page.goto(`${inspector.url}&replay=${SESSION}`);
    await page.waitForFunction(
      (n) => Number((document.getElementById("scrubber") as HTMLInputElement).max) === n,
      records.length,
    );
    await page.waitForSelector(`${chart}[data-chart="ready"][data-machine="turn"]`);
    await waitLit("done");
    const replayed = await seen(records);
    expect(replayed).toEqual(live);
    // What the charts did, as the live page marks it.
    expect(replayed[0]).toEqual([
      ["running", "running.waiting"],
      ["running.sampling→running.waiting on attempt.failed"],
    ]);
    expect(replayed[1][0]).toEqual(["running", "running.executing", "running.executing.running"]);
    expect(replayed[2][0]).toEqual(["running", "running.ending"]);
  }, 60_000);
});
