// The session's loop around its edges: an input that arrives while a redaction is being written
// and a session that is closed. Each was found by reading the change that let an idle
// session's coordinator go and built turn dependencies lazily.
import { describe, expect, it } from "vitest";
import { createAgent, memoryStore, scriptedModel } from "../index.ts";

const SECRET = "sk-live-GUARD-7c1d";

describe("the session loop's guards", () => {
  it("an input sent while a redaction is written waits for it, then runs on the redacted history", async () => {
    const model = scriptedModel([{ text: `Noted ${SECRET}.` }, { text: "next" }]);
    const agent = createAgent({ model, store: memoryStore() });
    const session = await agent.openSession("r");
    await session.prompt(`my key is ${SECRET}`);
    const ids = session
      .entries()
      .filter((e) => e.type === "user_message" || e.type === "assistant_message")
      .map((e) => e.id);

    const redacting = session.redact(ids, { reason: "a pasted key" });
    const next = session.prompt("and now?"); // before the redaction is written
    expect(await redacting).toMatchObject({ ok: true });
    expect((await next).status).toBe("completed");
    const sent = JSON.stringify(model.requests.at(-1)!.history);
    expect(sent).not.toContain(SECRET);
    expect(sent).toContain("[redacted: a pasted key]");
    expect(JSON.stringify(session.entries())).not.toContain(SECRET);
    await agent.close();
  });

  it("a closed session starts no turn: resume() after close() sends no request for the input it left queued", async () => {
    const model = scriptedModel([{ text: "one", delayMs: 100 }, { text: "two" }]);
    const agent = createAgent({ model, store: memoryStore() });
    const session = await agent.openSession("c");
    const first = session.prompt("first");
    await new Promise((r) => setTimeout(r, 20)); // the first turn is waiting for its answer
    await session.followUp("queued behind it"); // stored: it runs after a reopen and resume
    await session.close();
    await first;
    const sent = model.requests.length;
    session.resume();
    await new Promise((r) => setTimeout(r, 100));
    expect(model.requests).toHaveLength(sent);
    await agent.close();
  });
});
