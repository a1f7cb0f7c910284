import { type Decided, PermissionBroker } from "../../../actors/permissions.ts";
import type { PermissionReply, PermissionRequest } from "../../../contracts/permission.ts";

/**
 * Broken on purpose: a reply answers only the request it was given for; other pending requests
 * of the session wait for their own replies (invariant 12 of docs/architecture.md says a denial reaches them all).
 */
export class OneAtATimeBroker extends PermissionBroker {
  private readonly own = new Map<string, (d: Decided) => void>();

  override request(request: PermissionRequest): Promise<Decided> {
    if (this.evaluate(request.tool, request.risk) !== "ask") return super.request(request);
    return new Promise((resolve) => {
      this.own.set(request.requestId, resolve);
      // biome-ignore lint/suspicious/noExplicitAny: reaching the private options of the base class
      const ask = (this as any).options.ask as (r: PermissionRequest) => Promise<PermissionReply>;
      ask(request).then((reply) => this.reply(request.requestId, reply));
    });
  }

  override reply(requestId: string, reply: PermissionReply): boolean {
    const resolve = this.own.get(requestId);
    if (!resolve) return false;
    this.own.delete(requestId);
    const source = { type: "reply" as const, reply: reply.type };
    resolve({
      decision:
        reply.type === "deny"
          ? { type: "declined", reason: "declined" }
          : reply.type === "deny_with_feedback"
            ? { type: "corrected", feedback: `the user declined this call: ${reply.feedback}` }
            : { type: "allow" },
      source,
    });
    return true;
  }
}

/**
 * Broken on purpose (the behaviour before issue 17): an `allow_once` approves every other pending
 * request of the session too, whatever its tool and arguments — a blanket approval. Every other
 * reply is the real broker's.
 */
export class BlanketAllowOnceBroker extends PermissionBroker {
  override reply(requestId: string, reply: PermissionReply): boolean {
    // biome-ignore lint/suspicious/noExplicitAny: the private pending map of the base class
    const pending = (this as any).pending as Map<string, { resolve: (d: Decided) => void }>;
    if (reply.type !== "allow_once" || !pending.has(requestId))
      return super.reply(requestId, reply);
    const all = [...pending.values()];
    pending.clear();
    const source = { type: "reply" as const, reply: reply.type };
    for (const p of all) p.resolve({ decision: { type: "allow" }, source });
    return true;
  }
}

/**
 * Broken on purpose: every reply is read as a plain `deny`, so `allow_once` and a feedback reply
 * decline the whole turn. An oracle that reads the expected decision from the broker's own
 * `permission.decided` events stays green on it; one that expects the reply that was sent fails.
 */
export class EverythingDeniesBroker extends PermissionBroker {
  override reply(requestId: string, reply: PermissionReply): boolean {
    return super.reply(requestId, reply.type === "allow_always" ? reply : { type: "deny" });
  }
}
