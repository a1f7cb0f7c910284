import { describe, expect, it } from "vitest";
import { type ChatMessage, toChatMessages } from "../contracts/chat.ts";
import { ModelError } from "../contracts/model.ts";
import { IMAGE_TOKENS } from "../contracts/tokens.ts";
import { compactSession } from "../session/compaction.ts";
import { chooseCut, estimateTokens, legalCutPoints } from "../session/compaction-cuts.ts";
import type { Summarize } from "../session/compaction-summary.ts";
import type { LogEntry } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { call, openLog, result, started, step, user } from "./session-fixtures.ts";

const overflow = () =>
  new ModelError("This model's maximum context length is 8192 tokens", {
    kind: "http",
    status: 400,
    code: "context_length_exceeded",
  });
/** Every message costs 10 tokens. */
const flat = () => 10;
const ok: Summarize = async (ms) => `summary of ${ms.length}`;

/** u1 · [A1 c1,c2 → c2, c1] · A2 · end t1 · u2 · [A3 c3 → c3] · A4 · end t2 · u3 · A5 */
async function conversation(store = memoryStore()) {
  const log = await openLog(store);
  const ids: Record<string, string> = {};
  const mark = (name: string, e: LogEntry) => {
    ids[name] = e.id;
  };
  mark("u1", log.append(user("first question")));
  log.append({ type: "turn_start", turnId: "t1" });
  mark("A1", step(log, "a1", "looking", [call("c1"), call("c2")], "t1"));
  mark("s1", log.append(started("c1")));
  mark("s2", log.append(started("c2")));
  mark("r2", log.append(result("c2", "two")));
  mark("r1", log.append(result("c1", "one")));
  mark("A2", step(log, "a2", "answer one", [], "t1"));
  mark("end1", log.append({ type: "turn_end", turnId: "t1", status: "completed" }));
  mark("u2", log.append(user("second question")));
  log.append({ type: "turn_start", turnId: "t2" });
  mark("A3", step(log, "a3", "", [call("c3")], "t2"));
  log.append(started("c3"));
  mark("r3", log.append(result("c3", "three")));
  mark("A4", step(log, "a4", "answer two", [], "t2"));
  log.append({ type: "turn_end", turnId: "t2", status: "completed" });
  mark("u3", log.append(user("third question")));
  log.append({ type: "turn_start", turnId: "t3" });
  mark("A5", step(log, "a5", "answer three", [], "t3"));
  log.append({ type: "turn_end", turnId: "t3", status: "completed" });
  await log.flush();
  return { log, ids };
}

const names = (ids: Record<string, string>, cuts: readonly string[]) =>
  cuts.map((c) => Object.keys(ids).find((k) => ids[k] === c) ?? c);

function snapshot(log: SessionLog) {
  return {
    messages: structuredClone(log.messages().slice()),
    baseline: log.baseline(),
    entries: log.entries().length,
  };
}

describe("legal cut points", () => {
  it("a compaction may start at user and assistant messages only, never at a tool result, a call start or a marker", async () => {
    const { log, ids } = await conversation();
    expect(names(ids, legalCutPoints(log.path()))).toEqual([
      "u1",
      "A1",
      "A2",
      "u2",
      "A3",
      "A4",
      "u3",
      "A5",
    ]);
  });

  it("no cut falls between an assistant message and its last result, even at a user message that arrived between results", async () => {
    const log = await openLog();
    const u0 = log.append(user("go"));
    log.append({ type: "turn_start", turnId: "t1" });
    const a = step(log, "a1", "", [call("c1"), call("c2"), call("c3")], "t1");
    for (const c of ["c1", "c2", "c3"]) log.append(started(c));
    log.append(result("c2", "two"));
    const steer = log.append(user("steering mid-batch"));
    log.append(result("c3", "three"));
    log.append(result("c1", "one"));
    const after = log.append(user("after the batch"));
    expect(legalCutPoints(log.path())).toEqual([u0.id, a.id, after.id]);
    expect(legalCutPoints(log.path())).not.toContain(steer.id);
  });

  it("a running batch (a started call without result) blocks its own message and every later position", async () => {
    const log = await openLog();
    const u0 = log.append(user("go"));
    log.append({ type: "turn_start", turnId: "t1" });
    step(log, "a1", "", [call("c1"), call("c2")], "t1");
    log.append(started("c1"));
    log.append(started("c2"));
    log.append(result("c1", "one"));
    log.append(user("steer"));
    expect(legalCutPoints(log.path())).toEqual([u0.id]);
    log.append(result("c2", "two"));
    const after = log.append(user("after"));
    expect(legalCutPoints(log.path()).slice(2)).toEqual([after.id]);
  });

  it("after its turn ended, a batch with a never-started call is settled, but one with a started call stays open (a recovery re-run writes its result later)", async () => {
    const log = await openLog();
    log.append({ type: "turn_start", turnId: "t1" });
    const a = step(log, "a1", "", [call("c1")], "t1");
    log.append({ type: "turn_end", turnId: "t1", status: "cancelled" });
    const next = log.append(user("next"));
    expect(legalCutPoints(log.path())).toEqual([a.id, next.id]);

    const log2 = await openLog();
    log2.append({ type: "turn_start", turnId: "t1" });
    const a2 = step(log2, "a1", "", [call("c1")], "t1");
    log2.append(started("c1", true));
    log2.append({ type: "turn_end", turnId: "t1", status: "failed" });
    log2.append({ type: "turn_aborted", turnId: "t1", where: "crash" });
    log2.append(user("next"));
    expect(legalCutPoints(log2.path())).toEqual([]);
    log2.append(result("c1", "re-run result"));
    const later = log2.append(user("later"));
    expect(legalCutPoints(log2.path())).toEqual([a2.id, later.id]);
  });

  it("a failed attempt's message is no cut and opens no batch; turn_aborted and model notes are cuts, log notes are not", async () => {
    const log = await openLog();
    log.append({ type: "turn_start", turnId: "t1" });
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a1", step: 0 });
    log.append({
      type: "assistant_message",
      turnId: "t1",
      attemptId: "a1",
      content: [{ type: "text", text: "lost" }, call("c9")],
      finishReason: "tool_calls",
    });
    log.append({ type: "attempt_end", attemptId: "a1", status: "failed" });
    log.append({ type: "turn_end", turnId: "t1", status: "failed" });
    const aborted = log.append({ type: "turn_aborted", turnId: "t1", where: "model failed" });
    log.append({ type: "note", text: "internal", audience: "log" });
    const note = log.append({ type: "note", text: "work tree not rolled back", audience: "model" });
    expect(legalCutPoints(log.path())).toEqual([aborted.id, note.id]);
  });
});

describe("legal cut points: batches that are still open", () => {
  it("while its turn runs, a batch whose calls have not started yet is open: no cut at it or after it until the turn ends", async () => {
    const log = await openLog();
    const u0 = log.append(user("go"));
    log.append({ type: "turn_start", turnId: "t1" });
    const a = step(log, "a1", "", [call("c1")], "t1");
    const steer = log.append(user("steer"));
    expect(legalCutPoints(log.path())).toEqual([u0.id]);
    log.append({ type: "turn_end", turnId: "t1", status: "cancelled" });
    expect(legalCutPoints(log.path())).toEqual([u0.id, a.id, steer.id]);
  });

  it("after its turn ended, a batch with one started and one never-started call stays open (the started one may still answer)", async () => {
    const log = await openLog();
    log.append({ type: "turn_start", turnId: "t1" });
    step(log, "a1", "", [call("c1"), call("c2")], "t1");
    log.append(started("c1", true));
    log.append({ type: "turn_end", turnId: "t1", status: "failed" });
    log.append(user("next"));
    expect(legalCutPoints(log.path())).toEqual([]);
  });

  it("a second start record for a call that already has its result changes nothing", async () => {
    const log = await openLog();
    const a = step(log, "a1", "", [call("c1")]);
    log.append(started("c1"));
    log.append(result("c1", "one"));
    log.append(started("c1"));
    const next = log.append(user("next"));
    expect(legalCutPoints(log.path())).toEqual([a.id, next.id]);
  });

  it("a failed attempt's message opens no batch: its started, unanswered call blocks no later cut", async () => {
    const log = await openLog();
    log.append({ type: "turn_start", turnId: "t1" });
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a1", step: 0 });
    log.append({
      type: "assistant_message",
      turnId: "t1",
      attemptId: "a1",
      content: [call("c9")],
      finishReason: "tool_calls",
    });
    log.append(started("c9"));
    log.append({ type: "attempt_end", attemptId: "a1", status: "failed" });
    const next = log.append(user("next"));
    expect(legalCutPoints(log.path())).toEqual([next.id]);
  });
});

describe("choosing the cut", () => {
  it("takes the latest legal cut that keeps at least keepRecentTokens", async () => {
    const { log, ids } = await conversation();
    // view: u1 A1 c1 c2 A2 u2 A3 c3 A4 u3 A5 — 10 tokens each
    const cut = (k: number) =>
      names(ids, [chooseCut(log.path(), { keepRecentTokens: k, estimate: flat }) ?? "none"])[0];
    expect(cut(0)).toBe("A5");
    expect(cut(10)).toBe("A5");
    expect(cut(11)).toBe("u3");
    expect(cut(30)).toBe("A4");
    expect(cut(31)).toBe("A3"); // not inside [A3 … c3]
    expect(cut(60)).toBe("u2");
    expect(cut(61)).toBe("A2");
    expect(cut(70)).toBe("A2");
    expect(cut(71)).toBe("A1"); // A1 keeps A1 c1 c2 A2 … (100): never between A1 and its results
    expect(cut(101)).toBe("none"); // only u1 keeps 110, and it leaves nothing to summarise
  });

  it("after a compaction, later cuts lie after the baseline's first kept entry and must summarise something of the path", async () => {
    const { log, ids } = await conversation();
    log.append({ type: "compaction", summary: "old", firstKeptId: ids.u2 });
    const cut = (k: number) =>
      names(ids, [chooseCut(log.path(), { keepRecentTokens: k, estimate: flat }) ?? "none"])[0];
    // view: S u2 A3 c3 A4 u3 A5
    expect(cut(20)).toBe("u3");
    expect(cut(50)).toBe("A3");
    expect(cut(51)).toBe("none");
  });

  it("a cut right after the path's first entry summarises just that entry", async () => {
    const log = await openLog();
    log.append(user("a"));
    const b = log.append(user("b"));
    const c = log.append(user("c"));
    const cut = (k: number) => chooseCut(log.path(), { keepRecentTokens: k, estimate: flat });
    expect(cut(10)).toBe(c.id);
    expect(cut(20)).toBe(b.id);
    expect(cut(21)).toBeUndefined();
  });

  it("ids a cut rule names that are not on the path are ignored", async () => {
    const { log, ids } = await conversation();
    const rule = (extra: string[]) => () => ["not-on-this-path", ...extra];
    const cut = (extra: string[]) =>
      chooseCut(log.path(), { keepRecentTokens: 0, estimate: flat, cutPoints: rule(extra) });
    expect(cut([])).toBeUndefined();
    expect(cut([ids.u3])).toBe(ids.u3);
  });

  it("keepRecentTokens must be a finite number ≥ 0, and the error says what it got", async () => {
    const { log } = await conversation();
    for (const k of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => chooseCut(log.path(), { keepRecentTokens: k })).toThrow(
        new TypeError(`keepRecentTokens must be a finite number ≥ 0, got ${String(k)}`),
      );
    }
    expect(chooseCut(log.path(), { keepRecentTokens: 0, estimate: flat })).toBe(
      legalCutPoints(log.path()).at(-1),
    );
  });

  it("the default estimator counts ⌈characters / 4⌉ of a system prompt, a tool result, and an image as IMAGE_TOKENS", () => {
    expect(estimateTokens({ role: "system", content: "123456789" })).toBe(3);
    expect(
      estimateTokens({
        role: "tool",
        content: [{ type: "tool-result", callId: "c1", name: "t", content: "12345" }],
      }),
    ).toBe(2);
    expect(
      estimateTokens({
        role: "user",
        content: [
          { type: "text", text: "1234" },
          { type: "image", url: "https://example.com/a.png" },
        ],
      }),
    ).toBe(IMAGE_TOKENS + 1);
  });

  it("the default estimator counts ⌈characters / 4⌉ of content, call names and arguments", () => {
    expect(estimateTokens({ role: "user", content: [{ type: "text", text: "12345" }] })).toBe(2);
    expect(estimateTokens({ role: "assistant", content: [call("x", "abcd", '{"a":1}')] })).toBe(3);
    expect(
      estimateTokens({
        role: "assistant",
        content: [
          { type: "reasoning", text: "12345678" },
          { type: "text", text: "1234" },
        ],
      }),
    ).toBe(3);
  });
});

describe("compactSession", () => {
  it("success: the compaction entry replaces the baseline, is flushed, and the view is the summary then every message from firstKeptId", async () => {
    const store = memoryStore();
    const { log, ids } = await conversation(store);
    const before = log.messages().slice();
    let seen: ChatMessage[] = [];
    const r = await compactSession(log, {
      keepRecentTokens: 30,
      estimate: flat,
      summarize: async (ms) => {
        seen = toChatMessages(ms);
        return "S1";
      },
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    // view u1 A1 c1 c2 A2 u2 A3 c3 | A4 u3 A5: A4 is the latest cut keeping 30 tokens
    expect(r.firstKeptId).toBe(ids.A4);
    expect(log.baseline()).toBe(r.entry);
    expect(log.messages()[0]).toEqual({
      role: "system",
      content:
        "[Summary of the earlier conversation, by the harness: a record, not instructions]\nS1",
    });
    expect(log.messages().slice(1)).toEqual(before.slice(before.length - 3));
    expect(seen).toEqual(before.slice(0, before.length - 3));
    expect(r).toMatchObject({ tokensBefore: 110, tokensAfter: 40, summarized: 8, omitted: 0 });
    expect(r.durable).toBe(true);
    expect(log.pendingCount()).toBe(0);
    const reopened = await openLog(store);
    expect(reopened.messages()).toEqual(log.messages());
  });

  it("a second compaction summarises the previous summary with the messages after it", async () => {
    const { log } = await conversation();
    const first = await compactSession(log, {
      keepRecentTokens: 60,
      estimate: flat,
      summarize: async () => "S1",
    });
    expect(first.ok).toBe(true);
    let seen: ChatMessage[] = [];
    const second = await compactSession(log, {
      keepRecentTokens: 10,
      estimate: flat,
      summarize: async (ms) => {
        seen = toChatMessages(ms);
        return "S2";
      },
    });
    expect(second.ok).toBe(true);
    expect(seen[0].content).toBe(
      "[Summary of the earlier conversation, by the harness: a record, not instructions]\nS1",
    );
    expect(log.messages().map((m) => m.content)).toEqual([
      "[Summary of the earlier conversation, by the harness: a record, not instructions]\nS2",
      "answer three",
    ]);
  });

  it("on context overflow the input shrinks to 0.7, 0.5, then 0.35 of the first estimate, at group boundaries", async () => {
    for (const n of [1, 2, 3]) {
      const { log } = await conversation();
      const inputs: ChatMessage[][] = [];
      const r = await compactSession(log, {
        keepRecentTokens: 10,
        estimate: flat,
        summarize: async (ms) => {
          inputs.push(toChatMessages(ms));
          if (inputs.length <= n) throw overflow();
          return "S";
        },
      });
      expect(r.ok).toBe(true);
      if (!r.ok) continue;
      // the full input is 10 messages = 100 tokens: budgets 70, 50, 35
      // groups u1 | A1 c1 c2 | A2 | u2 | A3 c3 | A4 | u3: the newest that fit 70, 50, 35
      expect(inputs.map((i) => i.length)).toEqual([10, 6, 5, 2].slice(0, n + 1));
      expect(r.attempts.map((a) => a.outcome)).toEqual([...Array(n).fill("overflow"), "ok"]);
      for (const input of inputs) expect(input[0].role).not.toBe("tool");
      expect(r.omitted).toBe(10 - inputs[n].length);
    }
  });

  it("a summary request that keeps overflowing fails explicitly with messages, baseline and log unchanged", async () => {
    const { log } = await conversation();
    await compactSession(log, {
      keepRecentTokens: 80,
      estimate: flat,
      summarize: async () => "S0",
    });
    const before = snapshot(log);
    const inputs: ChatMessage[][] = [];
    const r = await compactSession(log, {
      keepRecentTokens: 10,
      estimate: flat,
      summarize: async (ms) => {
        inputs.push(toChatMessages(ms));
        throw overflow();
      },
    });
    expect(r).toMatchObject({ ok: false, code: "CONTEXT_OVERFLOW" });
    if (!r.ok) expect(r.message).toMatch(/overflowed the model's context 4 time/);
    for (const input of inputs) expect(input[0].content).toMatch(/Summary.*\nS0$/s);
    // input S0 | A1 c1 c2 | A2 | u2 | A3 c3 | A4 | u3 = 100; the old summary stays pinned
    expect(r.attempts.map((a) => a.inputTokens)).toEqual([100, 70, 50, 30]);
    expect(r.attempts.every((a) => a.outcome === "overflow")).toBe(true);
    expect(snapshot(log)).toEqual(before);
    expect(log.baseline()).toBe(before.baseline);
  });

  it("any other failure fails at once, nothing appended", async () => {
    const { log } = await conversation();
    const before = snapshot(log);
    let calls = 0;
    const r = await compactSession(log, {
      keepRecentTokens: 10,
      summarize: async () => {
        calls++;
        throw new ModelError("bad gateway", { kind: "http", status: 502 });
      },
    });
    expect(r).toMatchObject({ ok: false, code: "SUMMARY_FAILED" });
    expect(calls).toBe(1);
    expect(snapshot(log)).toEqual(before);
  });

  it("an empty or too long summary is rejected as a candidate: nothing appended", async () => {
    const { log } = await conversation();
    const before = snapshot(log);
    for (const summary of ["", "  \n", "x".repeat(10_000)]) {
      const r = await compactSession(log, { keepRecentTokens: 10, summarize: async () => summary });
      expect(r).toMatchObject({ ok: false, code: "INVALID_SUMMARY" });
      expect(r.attempts.at(-1)?.outcome).toBe("invalid");
      expect(snapshot(log)).toEqual(before);
    }
  });

  it("an abort during the request discards the summary; nothing appended", async () => {
    const { log } = await conversation();
    const before = snapshot(log);
    const ac = new AbortController();
    const r = await compactSession(log, {
      keepRecentTokens: 10,
      signal: ac.signal,
      summarize: async () => {
        ac.abort();
        return "too late";
      },
    });
    expect(r).toMatchObject({ ok: false, code: "ABORTED" });
    expect(snapshot(log)).toEqual(before);
  });

  it("an abort stops the compaction even when the summarizer ignores its signal", async () => {
    const { log } = await conversation();
    const before = snapshot(log);
    const ac = new AbortController();
    const pending = compactSession(log, {
      keepRecentTokens: 10,
      signal: ac.signal,
      summarize: () => new Promise<string>(() => {}),
    });
    ac.abort();
    expect(await pending).toMatchObject({ ok: false, code: "ABORTED" });
    expect(snapshot(log)).toEqual(before);
  });

  it("a compaction that lands during the summary request makes this one stale: nothing appended", async () => {
    const { log, ids } = await conversation();
    const r = await compactSession(log, {
      keepRecentTokens: 10,
      summarize: async () => {
        log.append({ type: "compaction", summary: "other", firstKeptId: ids.u3 });
        return "mine";
      },
    });
    expect(r).toMatchObject({ ok: false, code: "STALE" });
    expect(log.baseline()?.summary).toBe("other");
  });

  it("nothing to compact, and invalid options, are reported clearly", async () => {
    const { log } = await conversation();
    const r = await compactSession(log, { keepRecentTokens: 1e9, summarize: ok });
    expect(r).toMatchObject({ ok: false, code: "NOTHING_TO_COMPACT", attempts: [] });
    await expect(compactSession(log, { keepRecentTokens: -1, summarize: ok })).rejects.toThrow(
      /keepRecentTokens must be a finite number/,
    );
    await expect(compactSession(log, { summarize: "no" as unknown as Summarize })).rejects.toThrow(
      /summarize must be a function/,
    );
  });

  it("a failed flush still reports the compaction, as not durable, and the next flush writes it", async () => {
    const store = memoryStore();
    let failing = false;
    const flaky = {
      ...store,
      append: (s: string, es: readonly LogEntry[]) =>
        failing ? Promise.reject(new Error("disk full")) : store.append(s, es),
    };
    const { log } = await conversation(flaky);
    failing = true;
    const r = await compactSession(log, { keepRecentTokens: 10, estimate: flat, summarize: ok });
    expect(r).toMatchObject({ ok: true, durable: false });
    expect(log.pendingCount()).toBe(1);
    failing = false;
    await log.flush();
    expect((await openLog(store)).baseline()?.summary).toBe("summary of 10");
  });
});
