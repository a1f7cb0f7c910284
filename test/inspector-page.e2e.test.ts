// The inspector page's fixes from a newcomer's first hour, in headless Chromium: clicking an
// actor filters the event log at once; XState's snapshot records are hidden until asked for;
// a page with nothing live lists the stored sessions by their first prompt and date, in words.
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, defineTool, memoryStore, scriptedModel } from "../index.ts";
import { type Inspector, startInspector } from "../inspector/server.ts";
import { CHROMIUM_ARGS, describeInChromium } from "./support/chromium.ts";

let browser: Browser;
let inspector: Inspector;
let page: Page;
const store = memoryStore();
const PROMPT = "fix the typo in greet.ts";

const countText = () => page.textContent("#log-count");
const shownOf = async () => Number((await countText())!.split(" / ")[0].replace(/\D/g, ""));
const totalOf = async () => Number((await countText())!.split(" / ")[1].replace(/\D/g, ""));

describeInChromium("the inspector page's filters and start page", (executablePath) => {
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
    inspector = await startInspector({ store });
    const read = defineTool({
      name: "read_file",
      description: "reads a file",
      parameters: z.object({ path: z.string() }),
      traits: { readOnly: true, concurrencySafe: true },
      execute: ({ path }) => `contents of ${path}`,
    });
    const agent = createAgent({
      model: scriptedModel([
        {
          toolCalls: [
            { id: "call_a", name: "read_file", arguments: '{"path":"a.ts"}' },
            { id: "call_b", name: "read_file", arguments: '{"path":"b.ts"}' },
          ],
        },
        { text: "fixed" },
      ]),
      tools: [read],
      store,
      inspect: inspector.sink,
    });
    await agent.session("sess_page").prompt(PROMPT);
    await agent.close();
    page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.goto(inspector.url);
    await page.waitForSelector('[data-testid="actor-tree"] [data-kind="turn"][data-state="done"]');
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await inspector?.close();
  });

  it("hides XState's snapshot records by default; one click shows them, another hides them again", async () => {
    const total = await totalOf();
    const shown = await shownOf();
    const kinds = await page.$$eval('[data-testid="event-log"] .lrow:not([hidden]) .ty', (els) =>
      els.map((el) => el.textContent),
    );
    expect(kinds).not.toContain("@snapshot");
    const label = await page.textContent("#show-snapshots");
    const hidden = Number(/show (\d+) XState snapshots/.exec(label ?? "")?.[1]);
    expect(hidden).toBeGreaterThan(0);
    expect(shown + hidden).toBe(total);
    await page.click("#show-snapshots");
    await page.waitForFunction(
      (n) => document.getElementById("log-count")!.textContent!.startsWith(`${n} /`),
      total,
    );
    expect(await page.textContent("#show-snapshots")).toBe("hide XState snapshots");
    await page.click("#show-snapshots");
    await page.waitForFunction(
      (n) => document.getElementById("log-count")!.textContent!.startsWith(`${n} /`),
      shown,
    );
  });

  it("filters the event log as soon as a call is clicked, as if its id had been typed", async () => {
    const before = await shownOf();
    // The session has ended: nothing else makes the page redraw.
    await page.click('[data-testid="timeline"] [data-call-id="call_a"]');
    expect(await page.inputValue("#actor-filter")).toBe("call_a");
    await page.waitForFunction((n) => {
      const shown = Number(document.getElementById("log-count")!.textContent!.split(" / ")[0]);
      return shown < n;
    }, before);
    const rows = await page.$$eval('[data-testid="event-log"] .lrow:not([hidden]) .tx', (els) =>
      els.map((el) => el.textContent ?? ""),
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(row).toContain("call_a");
    // The same count as typing the id.
    const clicked = await shownOf();
    await page.fill("#actor-filter", "");
    await page.type("#actor-filter", "call_a");
    await page.waitForFunction(
      (n) => document.getElementById("log-count")!.textContent!.startsWith(`${n} /`),
      clicked,
    );
  });

  it("opened with nothing live, lists stored sessions by their first prompt and when they ran, in plain words", async () => {
    const fresh = await startInspector({ store });
    const start = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    try {
      await start.goto(fresh.url);
      const link = '[data-testid="stored-sessions"] a[data-session-id="sess_page"]';
      await start.waitForSelector(link);
      expect(await start.textContent(`${link} .prompt`)).toBe(`“${PROMPT}”`);
      expect(await start.textContent(`${link} .when`)).toMatch(
        /^last active just now · .+ · \d+ log entries$/,
      );
      const empty = await start.textContent('[data-testid="actor-tree"] .empty');
      expect(empty).toMatch(/Nothing has run here yet/);
      expect(empty).not.toMatch(/sink/);
    } finally {
      await start.close();
      await fresh.close();
    }
  });
});
