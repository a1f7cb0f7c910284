import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { seededIds } from "../actors/ids.ts";
import type { PermissionBroker, PermissionOptions } from "../actors/permissions.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { PermissionReply } from "../contracts/permission.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import { failWithSchedule } from "./support/harness.ts";
import {
  BlanketAllowOnceBroker,
  EverythingDeniesBroker,
  OneAtATimeBroker,
} from "./support/mutants/permission-broker.mutants.ts";

const replyArb: fc.Arbitrary<PermissionReply> = fc.oneof(
  fc.constant({ type: "allow_once" as const }),
  fc.constant({ type: "allow_always" as const }),
  fc.constant({ type: "deny" as const }),
  fc
    .string({ minLength: 1, maxLength: 8 })
    .map((f) => ({ type: "deny_with_feedback" as const, feedback: `fb:${f}` })),
);

/** One call of the message: which tool it calls, and the reply its ask will get. */
interface Ask {
  tool: "act" | "other";
  reply: PermissionReply;
}

type Expected = "allow" | "declined" | { feedback: string };

/**
 * The oracle, computed from what was sent and nothing the code reports: every call asks at
 * once; the replies reach the session in `delivered` order (call indexes). docs/permissions.md and the
 * seed: `allow_once` approves its own request; `allow_always` approves its own and every pending
 * request of the same tool (no configured deny here); `deny` declines every pending request;
 * `deny_with_feedback` gives every pending request that feedback. A reply to a request already
 * decided changes nothing.
 */
function expectedDecisions(asks: readonly Ask[], delivered: readonly number[]): Expected[] {
  const out: (Expected | undefined)[] = asks.map(() => undefined);
  const pending = new Set(asks.map((_, i) => i));
  for (const i of delivered) {
    if (!pending.has(i)) continue;
    const reply = asks[i].reply;
    const decide = (j: number, d: Expected) => {
      out[j] = d;
      pending.delete(j);
    };
    if (reply.type === "allow_once") decide(i, "allow");
    else if (reply.type === "allow_always") {
      for (const j of [...pending]) if (asks[j].tool === asks[i].tool) decide(j, "allow");
    } else if (reply.type === "deny") for (const j of [...pending]) decide(j, "declined");
    else {
      const feedback = `the user declined this call: ${reply.feedback}`;
      for (const j of [...pending]) decide(j, { feedback });
    }
  }
  return out.map((d) => d ?? "declined");
}

/**
 * Several high-risk calls of two tools ask at once; each ask's reply arrives when the scheduler
 * says so. Invariant 12 of docs/architecture.md against the oracle above: each call ends as the replies sent say, a
 * denial without feedback ends the turn (nothing runs, the model is not asked again), feedback
 * reaches the model, and every decision is in the log.
 */
async function scenario(
  s: fc.Scheduler,
  asks: Ask[],
  broker?: (o: PermissionOptions) => PermissionBroker,
): Promise<string | undefined> {
  const ran: number[] = [];
  const tool = (name: string) =>
    defineTool({
      name,
      description: "High risk.",
      parameters: z.object({ i: z.number() }),
      traits: { risk: "high", concurrencySafe: true },
      execute: ({ i }) => {
        ran.push(i);
        return `${name} ${i} done`;
      },
    });
  const model = scriptedModel([
    {
      toolCalls: asks.map((a, i) => ({
        id: `c${i}`,
        name: a.tool,
        arguments: JSON.stringify({ i }),
      })),
    },
    { text: "finished" },
  ]);
  const delivered: number[] = [];
  const session = createAgent({
    model,
    tools: [tool("act"), tool("other")],
    ids: seededIds(5),
    permissions: {
      ask: (r) => {
        const i = Number(r.callId.slice(1));
        // Recorded before the broker's own handler runs: the order the session receives them.
        return s
          .schedule(Promise.resolve(asks[i].reply), `reply ${asks[i].reply.type} to c${i}`)
          .then((reply) => {
            delivered.push(i);
            return reply;
          });
      },
    },
    permissionBroker: broker,
  }).session("p");
  const events: AgentEvent[] = [];
  session.subscribe((e) => events.push(e));
  const out = await s.waitFor(session.prompt("go"));
  await s.waitIdle();
  const expected = expectedDecisions(asks, delivered);
  const decided = new Map(
    events
      .filter(
        (e): e is Extract<AgentEvent, { type: "permission.decided" }> =>
          e.type === "permission.decided",
      )
      .map((e) => [Number(e.callId.slice(1)), e.decision]),
  );
  for (const [i, want] of expected.entries()) {
    const got = decided.get(i);
    const ok =
      want === "allow"
        ? got?.type === "allow"
        : want === "declined"
          ? got?.type === "declined"
          : got?.type === "corrected" && got.feedback === want.feedback;
    if (!ok)
      return `c${i} (${asks[i].tool}): expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}`;
  }
  const logged = session
    .entries()
    .filter(
      (e): e is Extract<LogEntry, { type: "permission_decision" }> =>
        e.type === "permission_decision",
    );
  for (const [i] of expected.entries()) {
    const entry = logged.find((e) => e.callId === `c${i}`);
    if (JSON.stringify(entry?.decision) !== JSON.stringify(decided.get(i)))
      return `c${i}'s decision is not in the log as decided: ${JSON.stringify(entry)}`;
  }
  if (expected.includes("declined")) {
    if (out.status !== "cancelled") return `a denial without feedback ended the turn ${out.status}`;
    if (ran.length > 0) return `a call ran although the turn was declined: ${ran}`;
    if (model.requests.length !== 1) return "the model was asked again after a denial";
  } else {
    if (out.status !== "completed") return `the turn ended ${out.status} with no denial`;
    const wantRan = expected.flatMap((d, i) => (d === "allow" ? [i] : []));
    if (JSON.stringify([...ran].sort()) !== JSON.stringify(wantRan))
      return `ran ${JSON.stringify(ran)}, expected exactly the allowed ${JSON.stringify(wantRan)}`;
    const toolMessages = (model.requests[1]?.messages ?? []).filter((m) => m.role === "tool");
    for (const [i, d] of expected.entries()) {
      if (typeof d !== "object") continue;
      const m = toolMessages.find((t) => t.role === "tool" && t.tool_call_id === `c${i}`);
      if (m?.role !== "tool" || !m.content.includes(d.feedback))
        return `the model did not see the feedback for c${i}`;
    }
  }
  const results = session.entries().filter((e) => e.type === "call_result");
  if (results.length !== asks.length) return `${results.length} results for ${asks.length} calls`;
  return undefined;
}

const askArb = fc.record({
  tool: fc.constantFrom("act" as const, "other" as const),
  reply: replyArb,
});

const property = (broker?: (o: PermissionOptions) => PermissionBroker) =>
  fc.asyncProperty(
    fc.scheduler(),
    fc.array(askArb, { minLength: 1, maxLength: 4 }),
    async (s, asks) => {
      const problem = await scenario(s, asks, broker);
      failWithSchedule(s, problem);
    },
  );

describe("permission replies at random times (invariant 12 of docs/architecture.md)", () => {
  it("each call ends as the replies sent say: allow_once approves only its own request, allow_always its tool's, a denial reaches every pending request", async () => {
    await fc.assert(property(), { numRuns: 200, seed: 12 });
  });

  it("the property catches a broker that answers only the request a reply was given for", async () => {
    const result = await fc.check(
      property((o) => new OneAtATimeBroker(o)),
      { numRuns: 200, seed: 12 },
    );
    expect(result.failed).toBe(true);
  });

  it("the property catches a broker whose allow_once approves every pending request (the old behaviour)", async () => {
    const result = await fc.check(
      property((o) => new BlanketAllowOnceBroker(o)),
      { numRuns: 200, seed: 12 },
    );
    expect(result.failed).toBe(true);
    expect(String(result.errorInstance)).toMatch(
      /expected "declined", got \{"type":"allow"\}|expected \{"feedback"/,
    );
  });

  it("the property catches a broker that reads every reply as a plain deny (the oracle is the reply sent)", async () => {
    const result = await fc.check(
      property((o) => new EverythingDeniesBroker(o)),
      { numRuns: 100, seed: 12 },
    );
    expect(result.failed).toBe(true);
    expect(String(result.errorInstance)).toMatch(/expected .*got .*declined/);
  });
});
