import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LeaseStore, SessionStore } from "../session/store.ts";
import { postgresStore } from "../session/stores/postgres-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { type RawServer, spawnServer } from "./support/serve-child.ts";
import { usePostgres } from "./support/use-postgres.ts";

// A follower's prompt is posted to the owner's inbox; when the owner closes, the follower takes
// the session over and runs it. Its prompt() must resolve with its answer (before: the waiter
// was settled by a follower-only timer that the takeover cleared, and a pending follower prompt
// let Node exit with code 13).

const db = usePostgres();
const dir = mkdtempSync(join(tmpdir(), "keel-follower-"));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
});

type Shared = SessionStore & LeaseStore;

/** The store, with its doorbell silenced: the owner never pulls the follower's input itself. */
const deaf = (store: Shared): Shared =>
  Object.assign(Object.create(null), store, { watchInputs: async () => async () => {} });

/** Waits until `session` has a posted, not yet taken input. */
async function posted(store: Shared, sessionId: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if ((await store.postedInputs(sessionId)).length > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no input was posted for ${sessionId}`);
}

function spawnFollower(where: string, sessionId: string, text: string, schema?: string) {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      join(import.meta.dirname, "support", "follower-child.ts"),
      where,
      sessionId,
      text,
      ...(schema ? [schema] : []),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  children.push(child);
  const lines: Record<string, unknown>[] = [];
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    let nl = out.indexOf("\n");
    while (nl !== -1) {
      lines.push(JSON.parse(out.slice(0, nl)));
      out = out.slice(nl + 1);
      nl = out.indexOf("\n");
    }
  });
  child.stderr.on("data", (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  const line = async (ev: string, pred: (l: Record<string, unknown>) => boolean = () => true) => {
    for (let i = 0; i < 1500; i++) {
      const found = lines.find((l) => l.ev === ev && pred(l));
      if (found) return found;
      if (child.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`follower ${child.pid}: no ${ev} (exit ${child.exitCode}); stderr: ${err}`);
  };
  return { child, line, exited, stderr: () => err };
}

describe("a follower keeps its promises", () => {
  it("one process: the follower's prompt resolves with its own answer after it takes the session over, and it read only the log's tail while waiting", async () => {
    const path = join(dir, "one.db");
    const owner = createAgent({
      model: scriptedModel(() => ({ text: "from the owner" })),
      store: deaf(sqliteStore(path)),
      lease: { owner: "owner:1", ttlMs: 2000, pollMs: 60_000 },
    });
    const a = await owner.openSession("s");
    expect(a.role).toBe("owner");
    expect(await a.prompt("first")).toMatchObject({ status: "completed", text: "from the owner" });
    const base = sqliteStore(path);
    let loads = 0;
    let tails = 0;
    const counted: Shared = Object.assign(Object.create(null), base, {
      load: (id: string) => {
        loads++;
        return base.load(id);
      },
      loadAfter: (id: string, after: number) => {
        tails++;
        return base.loadAfter!(id, after);
      },
    });
    const follower = createAgent({
      model: scriptedModel(() => ({ text: "from the follower" })),
      store: counted,
      lease: { owner: "follower:2", ttlMs: 2000, pollMs: 20 },
    });
    const b = await follower.openSession("s");
    expect(b.role).toBe("follower");
    loads = 0; // opening read the log once; waiting must not
    const pending = b.prompt("second", { id: "from-b" });
    await posted(base, "s");
    await new Promise((r) => setTimeout(r, 150)); // the follower polls meanwhile
    const loadsWhileWaiting = loads;
    await a.close();
    const result = await pending;
    expect(result).toMatchObject({ status: "completed", text: "from the follower", steps: 1 });
    expect(b.role).toBe("owner");
    // The answer is in the log, in the turn that consumed the follower's input.
    const entries = await base.load("s");
    const turn = entries.find((e) => e.type === "user_message" && e.inboxId === "from-b");
    expect(turn).toBeDefined();
    expect(loadsWhileWaiting).toBe(0); // it polled the tail, never the whole log
    expect(tails).toBeGreaterThan(2);
    await follower.close();
    await owner.close();
    await base.close();
  });

  it("one process: a prompt the owner runs resolves the follower's prompt() with the owner's answer, usage and steps", async () => {
    const path = join(dir, "run-by-owner.db");
    const owner = createAgent({
      model: scriptedModel(() => ({
        text: "the owner's answer",
        usage: { inputTokens: 7, outputTokens: 3 },
      })),
      store: sqliteStore(path),
      lease: { owner: "owner:1", ttlMs: 2000, pollMs: 20 },
    });
    const a = await owner.openSession("s");
    const follower = createAgent({
      model: scriptedModel([]),
      store: sqliteStore(path),
      lease: { owner: "follower:2", ttlMs: 2000, pollMs: 20 },
    });
    const b = await follower.openSession("s");
    expect(b.role).toBe("follower");
    const result = await b.prompt("run it for me");
    expect(result).toMatchObject({
      status: "completed",
      text: "the owner's answer",
      usage: { inputTokens: 7, outputTokens: 3 },
      steps: 1,
    });
    expect(a.role).toBe("owner");
    await follower.close();
    await owner.close();
  });

  it("SQLite, two processes: a follower process's prompt keeps it alive and resolves with its answer after the owner closes", async () => {
    const path = join(dir, "two.db");
    const store = sqliteStore(path);
    const owner = createAgent({
      model: scriptedModel([]),
      store: deaf(store),
      lease: { owner: "owner:1", ttlMs: 2000, pollMs: 60_000 },
    });
    const a = await owner.openSession("s");
    expect(a.role).toBe("owner");
    const child = spawnFollower(path, "s", "from the child");
    expect(await child.line("role")).toMatchObject({ role: "follower" });
    await posted(store, "s");
    await new Promise((r) => setTimeout(r, 200)); // long enough for an unkept process to exit
    expect(child.child.exitCode).toBeNull();
    await a.close();
    const done = await child.line("result");
    expect(done).toMatchObject({
      role: "owner",
      result: { status: "completed", text: `answer from ${child.child.pid}` },
    });
    expect(await child.exited).toBe(0);
    await owner.close();
    await store.close();
  });

  it.skipIf(!db.mode.run)(
    "PostgreSQL, two processes: ten followers' prompts each resolve with an answer after their owner closes",
    async () => {
      const schema = freshSchema("followers");
      const store = await postgresStore(db.url(), { schema, max: 6 });
      db.stores.push(store);
      const owner = createAgent({
        model: scriptedModel([]),
        store: deaf(store),
        lease: { owner: "owner:1", ttlMs: 2000, pollMs: 60_000 },
      });
      const ids = Array.from({ length: 10 }, (_, i) => `pg${i}`);
      const sessions = await Promise.all(ids.map((id) => owner.openSession(id)));
      // One follower process for the ten sessions (one process start, not ten).
      const follower = spawnFollower(db.url(), ids.join(","), "from", schema);
      expect(await follower.line("role")).toMatchObject({ roles: ids.map(() => "follower") });
      for (const id of ids) await posted(store, id);
      await Promise.all(sessions.map((s) => s.close()));
      for (const id of ids) {
        expect(await follower.line("result", (l) => l.sessionId === id)).toMatchObject({
          role: "owner",
          result: { status: "completed", text: `answer from ${follower.child.pid}` },
        });
      }
      expect(await follower.exited).toBe(0);
      await owner.close();
    },
    60_000,
  );
});

describe("through keel serve", () => {
  it("two keel serve processes share one SQLite store: a prompt sent to the follower's server is answered after the owner's server closes the session", async () => {
    const path = join(dir, "serve.db");
    const script = join(dir, "serve-script.json");
    writeFileSync(script, JSON.stringify([{ text: "the answer" }, { text: "the answer" }]));
    const start = async () => {
      const server = spawnServer(["--store", path, "--provider", "scripted", "--script", script], {
        KEEL_LEASE_POLL_MS: "50",
      });
      await server.waitFor((f) => f.type === "hello", "hello");
      server.send({ type: "hello", protocol: "1.0" });
      return server;
    };
    const ask = (server: RawServer, frame: { type: string; id: string; [k: string]: unknown }) => {
      server.send(frame);
      return server.waitFor(
        (f) => (f.type === "ok" || f.type === "error") && f.id === frame.id,
        `the response to ${frame.id}`,
      );
    };
    const one = await start();
    const two = await start();
    expect(await ask(one, { type: "session.open", id: "o1", sessionId: "s" })).toMatchObject({
      type: "ok",
    });
    expect(await ask(two, { type: "session.open", id: "o2", sessionId: "s" })).toMatchObject({
      type: "ok",
    });
    two.send({ type: "prompt", id: "p2", sessionId: "s", text: "from the second server" });
    await new Promise((r) => setTimeout(r, 300));
    expect(await ask(one, { type: "session.close", id: "c1", sessionId: "s" })).toMatchObject({
      type: "ok",
    });
    const answer = await two.waitFor(
      (f) => f.type === "ok" && f.id === "p2",
      "the prompt's answer",
    );
    expect(answer).toMatchObject({
      type: "ok",
      result: { status: "completed", text: "the answer" },
    });
    one.child.stdin.end();
    two.child.stdin.end();
    expect((await one.exited).code).toBe(0);
    expect((await two.exited).code).toBe(0);
  });
});
