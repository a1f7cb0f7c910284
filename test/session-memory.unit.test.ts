import { describe, expect, it } from "vitest";
import type { AnyActorRef } from "xstate";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { InspectSink } from "../actors/events.ts";
import { PermissionBroker, type PermissionOptions } from "../actors/permissions.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { defineTool } from "../tools/define-tool.ts";

const echo = defineTool({
  name: "echo",
  description: "Echoes.",
  parameters: z.object({ text: z.string() }),
  traits: { concurrencySafe: true, risk: "low" },
  execute: ({ text }) => text,
});

/** Every actor a session's runtime created, and those still running. */
function actorsSeen() {
  const actors: AnyActorRef[] = [];
  const sink: InspectSink = {
    observe: (event) => {
      if (event.type === "@xstate.actor") actors.push(event.actorRef as AnyActorRef);
    },
    publish: () => {},
  };
  const live = () => actors.filter((a) => a.getSnapshot().status === "active");
  return { sink, live, actors };
}

const oneStep = () =>
  scriptedModel(
    (request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "done" }
        : { toolCalls: [{ name: "echo", arguments: '{"text":"hi"}' }] },
    { record: "none" },
  );

describe("an idle session holds no running actor", () => {
  it("after a turn ends, every actor the session started is stopped, its coordinator included; the next prompt starts a new one and completes", async () => {
    const seen = actorsSeen();
    const agent = createAgent({ model: oneStep(), tools: [echo], inspect: seen.sink });
    const session = await agent.openSession("s1");
    expect(seen.actors).toHaveLength(0); // opened, no input: no actor at all

    expect((await session.prompt("go")).status).toBe("completed");
    await session.awaitIdle();
    await Promise.resolve(); // the coordinator is let go on the microtask after it went idle
    expect(seen.actors.length).toBeGreaterThanOrEqual(4); // coordinator, turn, batch, call
    expect(seen.live().map((a) => a.id)).toEqual([]);

    const before = seen.actors.length;
    expect((await session.prompt("again")).status).toBe("completed");
    await session.awaitIdle();
    await Promise.resolve();
    expect(seen.actors.length).toBeGreaterThan(before);
    expect(seen.live().map((a) => a.id)).toEqual([]);
    await agent.close();
  });

  it("prompts queued behind a turn, and one sent as it ends, all complete; then no actor of the session is left running", async () => {
    const seen = actorsSeen();
    const agent = createAgent({ model: oneStep(), tools: [echo], inspect: seen.sink });
    const session = await agent.openSession("s2");
    const first = session.prompt("go");
    // Queued behind the first turn: its handover starts a successor without going idle between.
    const second = session.prompt("again");
    const third = first.then(() => session.prompt("third"));
    expect((await first).status).toBe("completed");
    expect((await second).status).toBe("completed");
    expect((await third).status).toBe("completed");
    await session.awaitIdle();
    await Promise.resolve();
    expect(seen.live().map((a) => a.id)).toEqual([]);
    await agent.close();
  });
});

describe("an opened session that was never prompted holds no turn dependencies", () => {
  it("its turn dependencies (here the permission broker) are built at its first prompt, once, not when it opens", async () => {
    const built: string[] = [];
    let opening = "";
    const agent = createAgent({
      model: oneStep(),
      tools: [echo],
      permissions: { rules: [{ tool: "echo", action: "allow" }] },
      permissionBroker: (options: PermissionOptions) => {
        built.push(opening);
        return new PermissionBroker(options);
      },
    });
    const sessions = [];
    for (const id of ["a", "b", "c"]) {
      opening = id;
      sessions.push(await agent.openSession(id));
    }
    expect(built).toEqual([]);
    opening = "b";
    expect((await sessions[1].prompt("go")).status).toBe("completed");
    expect((await sessions[1].prompt("again")).status).toBe("completed");
    expect(built).toEqual(["b"]);
    await agent.close();
  });
});
