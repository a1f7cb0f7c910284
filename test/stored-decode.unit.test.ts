// The decoder of stored entries and checkpoints (session/decode.ts) on values, and the lint
// check that nothing else casts JSON.parse (scripts/check-decode.mjs).
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { seededIds } from "../actors/ids.ts";
import { KEEL_VERSION } from "../contracts/version.ts";
// @ts-expect-error: a plain .mjs script without declarations
import { casts, parseCasts } from "../scripts/check-decode.mjs";
import { checkEntry, decodeCheckpoint, decodeEntry } from "../session/decode.ts";
import { LOG_SCHEMA_VERSION, type LogEntry } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import { StoreError } from "../session/store-error.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { countingClock, user } from "./session-fixtures.ts";

const site = { store: "test store", sessionId: "s" };
const base = { id: "e1", parentId: null, seq: 1, at: 5 };

describe("decoding stored entries", () => {
  it("returns the entry a body holds, every field kept", () => {
    const entry: LogEntry = {
      ...base,
      type: "assistant_message",
      turnId: "t",
      attemptId: "a",
      content: [
        { type: "reasoning", text: "", providerMetadata: { anthropic: { signature: "sig" } } },
        { type: "text", text: "hi" },
        { type: "tool-call", id: "c", name: "add", arguments: "{}" },
      ],
      finishReason: "tool_calls",
      usage: { inputTokens: 1, outputTokens: 2 },
      writer: { keel: KEEL_VERSION, schema: LOG_SCHEMA_VERSION },
    };
    expect(decodeEntry(JSON.stringify(entry), 1, site)).toEqual(entry);
  });

  it("upgrades a log schema 2 assistant message (Chat tool calls) to content parts", () => {
    const v2 = {
      ...base,
      type: "assistant_message",
      turnId: "t",
      attemptId: "a",
      text: "sum",
      toolCalls: [{ id: "c", type: "function", function: { name: "add", arguments: "{}" } }],
      finishReason: "tool_calls",
    };
    expect(decodeEntry(JSON.stringify(v2), 1, site)).toMatchObject({
      content: [
        { type: "text", text: "sum" },
        { type: "tool-call", id: "c", name: "add", arguments: "{}" },
      ],
    });
  });

  it("refuses, naming store, session and seq: not JSON, a missing field, a bad nested part, an unknown type", () => {
    const refusal = (body: string) => {
      try {
        decodeEntry(body, 1, site);
      } catch (error) {
        expect(error).toBeInstanceOf(StoreError);
        return `${(error as StoreError).code} ${(error as Error).message}`;
      }
      throw new Error("decoded");
    };
    expect(refusal("{")).toMatch(/^CORRUPT test store: session s, entry seq 1 is not JSON \(/);
    expect(refusal(JSON.stringify({ ...base, type: "note" }))).toBe(
      "CORRUPT test store: session s, entry seq 1 is not a log entry this Keel can read: text: Invalid input: expected string, received undefined",
    );
    const badPart = { ...base, type: "user_message", text: "x", parts: [{ type: "image" }] };
    expect(refusal(JSON.stringify(badPart))).toMatch(/entry seq 1 .*: parts\.0: /);
    expect(refusal(JSON.stringify({ ...base, type: "vision" }))).toMatch(
      /unknown entry type "vision" \(not one of log schema 3's; a newer Keel's\? upgrade Keel to read it\)/,
    );
    expect(refusal(JSON.stringify({ ...base, seq: 2, type: "note", text: "" }))).toMatch(
      /body says seq 2, stored under seq 1/,
    );
  });

  it("refuses an entry a newer log schema wrote with NEWER_SCHEMA, whatever its shape", () => {
    const newer = { ...base, type: "note", text: "", writer: { keel: "2.0.0", schema: 99 } };
    expect(checkEntry(newer)).toMatchObject({ ok: false, code: "NEWER_SCHEMA" });
    expect(() => decodeEntry(JSON.stringify(newer), 1, site)).toThrow(
      /written by Keel 2\.0\.0 in log schema 99; .*upgrade Keel to 2\.0\.0 or later/,
    );
    const older = { ...newer, writer: { keel: "0.0.1", schema: 2 } };
    expect(checkEntry(older)).toMatchObject({ ok: true });
  });
});

describe("decoding checkpoints", () => {
  it("a checkpoint the log wrote decodes to itself; an older or damaged one is null (open replays)", async () => {
    const store = memoryStore();
    const log = await SessionLog.open({
      sessionId: "s",
      store,
      clock: countingClock(),
      ids: seededIds(1),
    });
    log.append(user("hi"));
    await log.close();
    const body = (await store.loadFromCheckpoint("s"))!.body;
    expect(decodeCheckpoint(body, site)).toEqual(JSON.parse(body));
    const value = JSON.parse(body);
    expect(decodeCheckpoint(JSON.stringify({ ...value, v: 0 }), site)).toBeNull();
    const projection = { ...value.projection, messages: [{ role: "user" }] };
    expect(decodeCheckpoint(JSON.stringify({ ...value, projection }), site)).toBeNull();
    expect(decodeCheckpoint("garbage", site)).toBeNull();
    const newer = { ...value, v: 2, writer: { keel: "3.0.0", schema: 7 } };
    expect(() => decodeCheckpoint(JSON.stringify(newer), site)).toThrow(StoreError);
  });
});

describe("the version and the lint check", () => {
  it("KEEL_VERSION is package.json's version", () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    expect(KEEL_VERSION).toBe(pkg.version);
  });

  it("check-decode finds a cast JSON.parse however it is written, and none in shipped code", () => {
    const text = [
      "const a = JSON.parse(s) as Entry;",
      "const b = (JSON.parse(s)) as unknown as Entry;",
      "const c = <Entry>JSON.parse(s);",
      "const d: unknown = JSON.parse(s);",
      "const e = JSON.parse(s).x as string;",
    ].join("\n");
    expect(parseCasts(text)).toEqual([1, 2, 3]);
    expect(casts(path.resolve(import.meta.dirname, ".."))).toEqual([]);
  });
});
