// A stored session replayed in the inspector draws what the live page drew: the demo's session
// (real tools, a refused unknown tool and truncated message, a 429 with Retry-After, a steer
// during the first batch) is logged to a temporary SQLite file, replayed through the shipped
// charts (inspector/replay.ts: the recorded answers and results, nothing runs) in headless Chromium,
// and checked at three scrubber positions through the DOM and its geometry. Screenshots go to
// test-output/inspector-replay-{1,2,3}.png.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { runDemo } from "../cli/demo.ts";
import { builtinTools } from "../index.ts";
import type { InspectRecord } from "../inspector/records.ts";
import { type Inspector, startInspector } from "../inspector/server.ts";
import { type SqliteSessionStore, sqliteStore } from "../session/stores/sqlite-store.ts";
import { CHROMIUM_ARGS, describeInChromium } from "./support/chromium.ts";

let dir = "";
let store: SqliteSessionStore;
let inspector: Inspector;
let browser: Browser;
let page: Page;
let sessionId = "";
let records: InspectRecord[] = [];

/** The records the inspector sends a page that opens `?replay=<sessionId>`. */
async function replayedRecords(url: string, id: string): Promise<InspectRecord[]> {
  const ws = new WebSocket(`${url.replace("http://", "ws://").replace("/?", "/ws?")}&replay=${id}`);
  const hello = await new Promise<{ records: InspectRecord[] }>((resolve, reject) => {
    ws.once("message", (data) => resolve(JSON.parse(String(data))));
    ws.once("error", reject);
  });
  ws.close();
  return hello.records;
}

/** The id of the last attempt (the one after the 429). */
function nextIdOf(list: InspectRecord[]): string {
  const last = list.findLast((r) => r.k === "agent" && r.e.type === "attempt.started");
  return last?.k === "agent" && last.e.type === "attempt.started" ? last.e.attemptId : "";
}

interface Box {
  left: number;
  right: number;
  top: number;
  bottom: number;
}
const overlap = (a: Box, b: Box) =>
  a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;

describeInChromium("a stored session replayed in the inspector", (executablePath) => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "keel-replay-"));
    const file = join(dir, "keel.db");
    const code = await runDemo({ inspect: false, store: file, out: { write: () => true } });
    expect(code).toBe(0);
    store = sqliteStore(file);
    [{ sessionId }] = await store.list();
    // The demo's tools (their traits and schemas decide how its calls run), on any folder:
    // nothing runs in a replay.
    const tools = builtinTools({ root: dir });
    inspector = await startInspector({ store, tools });
    // The records the page is sent (a replay's ids are its own: read them, do not make them).
    records = await replayedRecords(inspector.url, sessionId);
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.goto(`${inspector.url}&replay=${sessionId}`);
    await page.waitForFunction(
      (n) => Number((document.getElementById("scrubber") as HTMLInputElement).max) === n,
      records.length,
    );
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await inspector?.close();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Moves the scrubber to just after the first record that `match` accepts (or the end). */
  async function scrubTo(match?: (r: InspectRecord) => boolean) {
    const position = match ? records.findIndex(match) + 1 : records.length;
    expect(position).toBeGreaterThan(0);
    await page.$eval(
      "#scrubber",
      (el, v) => {
        const input = el as HTMLInputElement;
        input.value = String(v);
        input.dispatchEvent(new Event("input"));
      },
      position,
    );
    await page.waitForFunction(
      (v) => (document.getElementById("scrub-label")?.textContent ?? "").includes(`· ${v} /`),
      position.toLocaleString("en-US"),
    );
    return position;
  }
  const tree = '[data-testid="actor-tree"]';
  const kinds = (selector: string) =>
    page.$$eval(selector, (els) =>
      els.map((el) => `${el.getAttribute("data-kind")}:${el.getAttribute("data-actor-id")}`),
    );
  const shot = async (n: number) => {
    mkdirSync("test-output", { recursive: true });
    await page.screenshot({ path: `test-output/inspector-replay-${n}.png` });
  };

  it("1 · during the first batch: the batch runs its calls under the turn, the session chart's work region runs", async () => {
    // Just after the first call's actor reached `started` (its `call.started` event comes first).
    await scrubTo((r) => r.k === "snap" && r.id === "call_ls" && r.state === "started");
    await page.waitForSelector(`${tree} [data-kind="session-chart"][data-state*="work.running"]`);
    await page.waitForSelector(
      `${tree} [data-kind="turn"] [data-kind="batch"][data-state="running"]`,
    );
    expect(await kinds(`${tree} [data-kind="batch"] [data-kind="call"]`)).toEqual([
      "call:call_ls",
      "call:call_greet",
      "call:call_readme",
    ]);
    expect(await page.getAttribute(`${tree} [data-actor-id="call_ls"]`, "data-state")).toBe(
      "started",
    );
    await shot(1);
  });

  it("2 · in the 429's wait: the retry wait counts down and is drawn on the model lane; the doorbell rang for the steer", async () => {
    await scrubTo((r) => r.k === "agent" && r.e.type === "retry.scheduled");
    const wait = '[data-testid="retry-waits"] [data-retry-state="waiting"]';
    await page.waitForSelector(wait);
    expect(await page.textContent(`${wait} .count`)).toMatch(/^\d+\.\ds$/);
    expect(await page.$$('[data-testid="timeline"] .lane-bar.rwait')).toHaveLength(1);
    // The session chart's `pendingWake` (the doorbell) as the live chart holds it: rung, not yet answered.
    expect(await page.getAttribute('[data-testid="doorbell"]', "data-wake")).toBe("rung");
    await shot(2);
  });

  it("3 · at the end: every attempt, the batch and its calls are still in the tree, the wait is drawn up to the next attempt, the doorbell is quiet and the lane labels clear their counts", async () => {
    await scrubTo();
    await page.waitForSelector(`${tree} [data-kind="turn"][data-state="done"]`);
    // The tree of the live page at the end of the demo.
    expect(await kinds(`${tree} [data-kind="batch"] [data-kind="call"]`)).toEqual([
      "call:call_ls",
      "call:call_greet",
      "call:call_readme",
      "call:call_grep",
      "call:call_edit",
    ]);
    const underTurn = await kinds(`${tree} [data-kind="turn"] > .kids > [data-kind]`);
    expect(underTurn.filter((k) => k.startsWith("attempt:"))).toHaveLength(7);
    expect(underTurn.filter((k) => k.startsWith("call:"))).toEqual([
      "call:call_fetch",
      "call:call_edit_cut",
    ]);
    expect(underTurn[0]).toBe("batch:batch");
    for (const id of ["call_ls", "call_edit_cut", `${nextIdOf(records)}`]) {
      expect(await page.isVisible(`${tree} [data-actor-id="${id}"]`), id).toBe(true);
    }
    // The retry wait: done, and its bar ends where the next attempt's bar begins.
    await page.waitForSelector('[data-testid="retry-waits"] [data-retry-state="done"]');
    const failed = records.find((r) => r.k === "agent" && r.e.type === "retry.scheduled");
    const next = records.find(
      (r) =>
        r.k === "agent" &&
        r.e.type === "attempt.started" &&
        r.t >= (failed?.t ?? 0) &&
        r !== failed,
    );
    const nextId = next?.k === "agent" && next.e.type === "attempt.started" ? next.e.attemptId : "";
    const waitBox = await page.$eval('[data-testid="timeline"] .lane-bar.rwait', (el) =>
      el.getBoundingClientRect().toJSON(),
    );
    const attemptBox = await page.$eval(
      `[data-testid="timeline"] .lane-bar.attempt[title^="attempt ${nextId} "]`,
      (el) => el.getBoundingClientRect().toJSON(),
    );
    expect(waitBox.width).toBeGreaterThan(100);
    expect(Math.abs(waitBox.right - attemptBox.left)).toBeLessThan(3);
    // The doorbell is shown (quiet), not "not exposed".
    expect(await page.getAttribute('[data-testid="doorbell"]', "data-wake")).toBe("none");
    expect(await page.textContent('[data-testid="doorbell"]')).toBe("doorbell: quiet");
    // Each lane's title and its count stay apart and inside the lane.
    const lanes = await page.$$eval('[data-testid="inbox"] .lane', (els) =>
      els.map((lane) => ({
        lane: lane.getAttribute("data-lane"),
        box: lane.getBoundingClientRect().toJSON(),
        title: lane.querySelector(".head b")!.getBoundingClientRect().toJSON(),
        count: lane.querySelector(".head .muted")!.getBoundingClientRect().toJSON(),
        text: lane.querySelector(".head .muted")!.textContent,
        // Lines each is drawn on: a label squeezed by its count wraps ("follow-" / "up").
        lines: [".head b", ".head .muted"].map((s) => {
          const range = document.createRange();
          range.selectNodeContents(lane.querySelector(s)!);
          return new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top))).size;
        }),
      })),
    );
    expect(lanes.find((l) => l.lane === "next-turn")?.text).toBe("1 consumed");
    for (const l of lanes) {
      if (!l.text) continue;
      expect(overlap(l.title, l.count), `${l.lane}: title and count overlap`).toBe(false);
      expect(l.lines, `${l.lane}: title and count each on one line`).toEqual([1, 1]);
      for (const part of [l.title, l.count]) {
        expect(part.left).toBeGreaterThanOrEqual(l.box.left);
        expect(part.right).toBeLessThanOrEqual(l.box.right);
      }
    }
    await shot(3);
  });
});
