// `keel serve --http` as a real process: the token it prints gates every route (401 without it,
// nothing runs); `--no-token` is refused off loopback; and a reader resuming its events from any
// id after the process was stopped and started again on the same SQLite file gets exactly the
// later entries.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import { type HttpChild, startHttpChild } from "./support/http-child.ts";
import { runKeel } from "./support/run-keel.ts";
import { readSse } from "./support/sse-client.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-serve-http-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let fake: FakeOpenAIServer;
let children: HttpChild[] = [];
afterEach(async () => {
  for (const c of children) await c.stop();
  children = [];
  await fake?.close();
});

const env = () => ({
  KEEL_PROVIDER: "openai-compatible",
  OPENAI_BASE_URL: fake.baseURL,
  OPENAI_API_KEY: "test-key",
  KEEL_MODEL: "test-model",
  KEEL_CONTEXT_WINDOW: "32768",
});

async function start(args: string[]) {
  const child = await startHttpChild(args, dir, env());
  children.push(child);
  return child;
}

describe("keel serve --http", { timeout: 60_000 }, () => {
  it("prints a token that every route needs: without it 401 and no model request", async () => {
    fake = await startFakeOpenAIServer();
    const s = await start(["--store", "memory"]);
    expect(s.token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    for (const [method, path] of [
      ["GET", "/sessions"],
      ["POST", "/sessions/a/prompt"],
      ["POST", "/chat"],
      ["GET", "/sessions/a/events"],
    ]) {
      const res = await fetch(s.api + path, {
        method,
        body: method === "POST" ? '{"text":"hi"}' : undefined,
      });
      expect(res.status, path).toBe(401);
      expect((await res.json()).error.code).toBe("UNAUTHORIZED");
    }
    expect(fake.requests).toHaveLength(0);
    const ok = await fetch(`${s.api}/sessions`, {
      headers: { authorization: `Bearer ${s.token}` },
    });
    expect(ok.status).toBe(200);
  });

  it("refuses --no-token off loopback, and takes it on loopback", async () => {
    fake = await startFakeOpenAIServer();
    const refused = await runKeel(
      ["serve", "--http", "0", "--host", "0.0.0.0", "--no-token", "--store", "memory"],
      {
        cwd: dir,
        env: env(),
      },
    );
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/--no-token is allowed only on a loopback address/);
    const open = await start(["--no-token", "--store", "memory"]);
    expect(open.token).toBeUndefined();
    expect((await fetch(`${open.api}/sessions`)).status).toBe(200);
  });

  it("refuses options of the other transport instead of ignoring them", async () => {
    fake = await startFakeOpenAIServer();
    for (const [args, said] of [
      [["--http", "0", "--stdio"], /one transport/],
      [["--http", "0", "--control-timeout", "5"], /--stdio options/],
      [["--stdio", "--static", "x"], /--http options/],
      [["--http", "70000"], /port from 0 to 65535/],
    ] as const) {
      const run = await runKeel(["serve", ...args, "--store", "memory"], { cwd: dir, env: env() });
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stderr).toMatch(said);
    }
  });

  it("after the process restarts on the same SQLite file, a resume from any id gets every later entry once", async () => {
    fake = await startFakeOpenAIServer();
    fake.enqueue(
      streamReply({ text: ["Before ", "the restart."] }),
      streamReply({ text: "After it." }),
    );
    const file = join(dir, "keel.db");
    const first = await start(["--store", file]);
    const auth = { authorization: `Bearer ${first.token}` };
    const reader = await readSse(`${first.api}/sessions/s1/events`, auth);
    const done = await fetch(`${first.api}/sessions/s1/prompt`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ text: "one", wait: true }),
    });
    expect(await done.json()).toMatchObject({ status: "completed", text: "Before the restart." });
    await reader.until((e) => e.event === "entry" && JSON.parse(e.data).type === "turn_end");
    reader.close();
    expect(await first.stop()).toBe(0);
    children = [];
    const second = await start(["--store", file, "--token", first.token!]);
    await fetch(`${second.api}/sessions/s1/prompt`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ text: "two", wait: true }),
    });
    const all = (await (await fetch(`${second.api}/sessions/s1/entries`, { headers: auth })).json())
      .entries as { seq: number }[];
    for (const from of reader.events) {
      const after = Number(from.id!.split(".")[0]);
      const expected = all.filter((e) => e.seq > after).map((e) => String(e.seq));
      const again = await readSse(`${second.api}/sessions/s1/events`, {
        ...auth,
        "last-event-id": from.id!,
      });
      await again.until((_e, got) => got.length >= expected.length);
      await new Promise((r) => setTimeout(r, 20));
      again.close();
      expect(
        again.events.map((e) => e.id),
        `after ${from.id}`,
      ).toEqual(expected);
    }
  });
});
