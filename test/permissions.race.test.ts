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
import { OneAtATimeBroker } from "./support/mutants/permission-broker.mutants.ts";

const replyArb: fc.Arbitrary<PermissionReply> = fc.oneof(
  fc.constant({ type: "allow_once" as const }),
  fc.constant({ type: "deny" as const }),
  fc
    .string({ minLength: 1, maxLength: 8 })
    .map((f) => ({ type: "deny_with_feedback" as const, feedback: `fb:${f}` })),
);

/**
 * Several high-risk calls ask at once; each ask's reply arrives when the scheduler says so.
 * Invariant 12: a denial without feedback ends the turn (nothing runs, the model is not asked
 * again); with feedback, the model sees it; every pending request gets the same reply.
 */
async function scenario(
  s: fc.Scheduler,
  replies: PermissionReply[],
  broker?: (o: PermissionOptions) => PermissionBroker,
): Promise<string | undefined> {
  const ran: string[] = [];
  const tool = defineTool({
    name: "act",
    description: "High risk.",
    parameters: z.object({ i: z.number() }),
    traits: { risk: "high", concurrencySafe: true },
    execute: ({ i }) => {
      ran.push(`act ${i}`);
      return `act ${i} done`;
    },
  });
  const model = scriptedModel([
    {
      toolCalls: replies.map((_, i) => ({
        id: `c${i}`,
        name: "act",
        arguments: JSON.stringify({ i }),
      })),
    },
    { text: "finished" },
  ]);
  const session = createAgent({
    model,
    tools: [tool],
    ids: seededIds(5),
    permissions: {
      ask: (r) =>
        s.schedule(Promise.resolve(replies[Number(r.callId.slice(1))]), `reply to ${r.callId}`),
    },
    permissionBroker: broker,
  }).session("p");
  const events: AgentEvent[] = [];
  session.subscribe((e) => events.push(e));
  const out = await s.waitFor(session.prompt("go"));
  await s.waitIdle();
  const decided = events.filter((e) => e.type === "permission.decided") as Extract<
    AgentEvent,
    { type: "permission.decided" }
  >[];
  const kinds = new Set(decided.map((d) => JSON.stringify(d.decision)));
  if (kinds.size > 1) return `pending requests got different replies: ${[...kinds].join(" / ")}`;
  const decision = decided[0]?.decision;
  if (decision?.type === "declined") {
    if (out.status !== "cancelled") return `a denial without feedback ended the turn ${out.status}`;
    if (ran.length > 0) return `a declined call ran: ${ran}`;
    if (model.requests.length !== 1) return "the model was asked again after a denial";
  }
  if (decision?.type === "corrected") {
    if (out.status !== "completed") return `a denial with feedback ended the turn ${out.status}`;
    const seen = (model.requests[1]?.messages ?? []).filter(
      (m) => m.role === "tool" && m.content.includes(decision.feedback),
    );
    if (seen.length !== replies.length) return "the model did not see the feedback for every call";
  }
  const results = session.entries().filter((e) => e.type === "call_result") as Extract<
    LogEntry,
    { type: "call_result" }
  >[];
  if (results.length !== replies.length)
    return `${results.length} results for ${replies.length} calls`;
  return undefined;
}

const property = (broker?: (o: PermissionOptions) => PermissionBroker) =>
  fc.asyncProperty(
    fc.scheduler(),
    fc.array(replyArb, { minLength: 1, maxLength: 4 }),
    async (s, replies) => {
      const problem = await scenario(s, replies, broker);
      failWithSchedule(s, problem);
    },
  );

describe("permission replies at random times (invariant 12)", () => {
  it("a denial ends the turn, feedback reaches the model, every pending request gets the same reply", async () => {
    await fc.assert(property(), { numRuns: 150, seed: 12 });
  });

  it("the property catches a broker that answers only the request a reply was given for", async () => {
    const result = await fc.check(
      property((o) => new OneAtATimeBroker(o)),
      { numRuns: 200, seed: 12 },
    );
    expect(result.failed).toBe(true);
  });
});
