import { PermissionBroker } from "../../../actors/permissions.ts";
import type {
  PermissionDecision,
  PermissionReply,
  PermissionRequest,
} from "../../../contracts/permission.ts";

/**
 * Broken on purpose: a reply answers only the request it was given for; other pending requests
 * of the session wait for their own replies (invariant 12 says they all get the same one).
 */
export class OneAtATimeBroker extends PermissionBroker {
  private readonly own = new Map<string, (d: PermissionDecision) => void>();

  override request(request: PermissionRequest): Promise<PermissionDecision> {
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
    resolve(
      reply.type === "deny"
        ? { type: "declined", reason: "declined" }
        : reply.type === "deny_with_feedback"
          ? { type: "corrected", feedback: reply.feedback }
          : { type: "allow" },
    );
    return true;
  }
}
