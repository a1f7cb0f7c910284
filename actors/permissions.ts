import type {
  PermissionAction,
  PermissionDecision,
  PermissionReply,
  PermissionRequest,
  PermissionRule,
} from "../contracts/permission.ts";
import type { PreparedCall, Risk } from "../tools/types.ts";

/** `createAgent({ permissions })`: rules, defaults by risk and the embedder's approver. */
export interface PermissionOptions {
  /** Configured rules, checked first; a configured `deny` wins over any reply. */
  rules?: PermissionRule[];
  /** By risk when no rule matches. Default: low and medium allow, high ask. */
  defaults?: Partial<Record<Risk, PermissionAction>>;
  /**
   * Asks the embedder (UI, control protocol). Contract: may take any time; must resolve with a
   * reply (a rejection is read as `deny`). Without it, a call that needs asking is denied with
   * feedback telling the model no one can approve it.
   */
  ask?: (request: PermissionRequest) => Promise<PermissionReply>;
}

interface Pending {
  request: PermissionRequest;
  resolve: (decision: PermissionDecision) => void;
}

const DEFAULTS: Record<Risk, PermissionAction> = { low: "allow", medium: "allow", high: "ask" };

/**
 * One session's permission state: configured rules, rules added by `allow_always`, and the
 * requests waiting for a reply. A reply reaches every pending request of the session (DESIGN
 * §7, invariant 12): `allow_once`, `deny` and `deny_with_feedback` answer them all alike;
 * `allow_always` adds its rule and re-evaluates them (a configured deny still wins; those that
 * still need asking keep waiting).
 */
export class PermissionBroker {
  private readonly options: PermissionOptions;
  private readonly always = new Set<string>();
  private readonly pending = new Map<string, Pending>();

  constructor(options: PermissionOptions) {
    this.options = options;
  }

  /** What policy says now, without asking. This is a pure function of the broker's rules. */
  evaluate(tool: string, risk: Risk): PermissionAction {
    for (const rule of this.options.rules ?? []) {
      if (rule.action !== "deny") continue;
      if (matches(rule, tool, risk)) return "deny";
    }
    if (this.always.has(tool)) return "allow";
    for (const rule of this.options.rules ?? []) if (matches(rule, tool, risk)) return rule.action;
    return this.options.defaults?.[risk] ?? DEFAULTS[risk];
  }

  /** Decides one request: at once by policy, or after a reply. */
  request(request: PermissionRequest): Promise<PermissionDecision> {
    const action = this.evaluate(request.tool, request.risk);
    if (action === "allow") return Promise.resolve({ type: "allow" });
    if (action === "deny") {
      return Promise.resolve({
        type: "corrected",
        feedback: `the session's permission rules deny ${request.tool}. Do not retry it; use another way or ask the user.`,
      });
    }
    const ask = this.options.ask;
    if (!ask) {
      return Promise.resolve({
        type: "corrected",
        feedback: `${request.tool} (risk ${request.risk}) needs the user's approval and no one can approve it in this session. Use a lower-risk tool or tell the user what you need.`,
      });
    }
    return new Promise((resolve) => {
      this.pending.set(request.requestId, { request, resolve });
      ask(request).then(
        (reply) => this.reply(request.requestId, reply),
        () => this.reply(request.requestId, { type: "deny" }),
      );
    });
  }

  /**
   * Applies a reply to every pending request of the session. Returns false, changing nothing,
   * when no request with that id is waiting (unknown, or already answered).
   */
  reply(requestId: string, reply: PermissionReply): boolean {
    const origin = this.pending.get(requestId);
    if (!origin) return false;
    if (reply.type === "allow_always") {
      this.always.add(origin.request.tool);
      for (const [id, p] of this.pending) {
        const action = this.evaluate(p.request.tool, p.request.risk);
        if (action === "ask") continue;
        this.pending.delete(id);
        p.resolve(
          action === "allow"
            ? { type: "allow" }
            : {
                type: "corrected",
                feedback: `the session's permission rules deny ${p.request.tool}. Do not retry it; use another way or ask the user.`,
              },
        );
      }
      return true;
    }
    const decision: PermissionDecision =
      reply.type === "allow_once"
        ? { type: "allow" }
        : reply.type === "deny"
          ? { type: "declined", reason: `permission to run ${origin.request.tool} was declined` }
          : { type: "corrected", feedback: `the user declined this call: ${reply.feedback}` };
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.resolve(decision);
    return true;
  }

  /** Requests waiting for a reply (for UIs and the control protocol). */
  waiting(): PermissionRequest[] {
    return [...this.pending.values()].map((p) => p.request);
  }

  /** Drops waiting requests (the turn was cancelled); they resolve as declined. */
  cancelAll(reason: string): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.resolve({ type: "declined", reason });
  }
}

function matches(rule: PermissionRule, tool: string, risk: Risk): boolean {
  const toolOk = rule.tool === undefined || rule.tool === "*" || rule.tool === tool;
  const riskOk = rule.risk === undefined || rule.risk === risk;
  return toolOk && riskOk;
}

/**
 * Decides every call at once (those that need asking wait for replies), reporting
 * `permission.requested` / `permission.decided` through `emit`. Contract of `emit`: must not throw.
 */
export async function decideAll(
  broker: PermissionBroker,
  calls: readonly PreparedCall[],
  sessionId: string,
  emit: (event: PermissionEvent) => void,
): Promise<{ call: PreparedCall; decision: PermissionDecision }[]> {
  return Promise.all(
    calls.map(async (call) => {
      const request: PermissionRequest = {
        requestId: `${call.id}.perm`,
        sessionId,
        callId: call.id,
        tool: call.name,
        args: call.args,
        risk: call.traits.risk,
      };
      if (broker.evaluate(call.name, call.traits.risk) === "ask") {
        emit({ type: "permission.requested", request });
      }
      const decision = await broker.request(request);
      emit({ type: "permission.decided", requestId: request.requestId, callId: call.id, decision });
      return { call, decision };
    }),
  );
}

/** The permission events `decideAll` reports (members of `AgentEvent` without session stamps). */
export type PermissionEvent =
  | { type: "permission.requested"; request: PermissionRequest }
  | { type: "permission.decided"; requestId: string; callId: string; decision: PermissionDecision };
