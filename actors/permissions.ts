import type {
  DecisionSource,
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

/** A request's decision and where it came from (written to the log as `permission_decision`). */
export interface Decided {
  decision: PermissionDecision;
  source: DecisionSource;
}

interface Pending {
  request: PermissionRequest;
  resolve: (decided: Decided) => void;
}

const POLICY: DecisionSource = Object.freeze({ type: "policy" });

const policyDenied = (tool: string): PermissionDecision => ({
  type: "corrected",
  feedback: `the session's permission rules deny ${tool}. Do not retry it; use another way or ask the user.`,
});

const DEFAULTS: Record<Risk, PermissionAction> = { low: "allow", medium: "allow", high: "ask" };

/**
 * The rule of an agent created without a `permissions` option (docs/permissions.md): a call to
 * a tool that declares risk `high` (the built-in `shell`, an MCP tool its annotations call
 * destructive or open-world, a tool declared `risk: "high"`) is refused with feedback to the
 * model, and `onProblem` is told (the agent says it once); every other call runs.
 */
export interface Unconfigured {
  /** Whether the session's tool of that name declares risk `high`. */
  declaresHigh: (tool: string) => boolean;
  /** Told of each refusal, with one line naming the option that allows it. */
  onProblem: (line: string) => void;
}

const unconfiguredDenied = (tool: string): PermissionDecision => ({
  type: "corrected",
  feedback: `${tool} is a high-risk tool and this agent allows no high-risk call without permission rules, so it did not run. Do not retry it; use a lower-risk tool or tell the user what you need.`,
});

/** The one line an unconfigured agent reports for a refused high-risk call. */
export const unconfiguredProblem = (tool: string): string =>
  `refused ${tool} (risk high): an agent created without a \`permissions\` option runs no high-risk call. Pass createAgent({ permissions: { defaults: { high: "allow" } } }) to allow them, or permissions.ask to approve each one (docs/permissions.md).`;

/**
 * One session's permission state: configured rules, rules added by `allow_always`, and the
 * requests waiting for a reply (docs/permissions.md, invariant 12 of docs/architecture.md). What a reply does to the other
 * pending requests of the session depends on the reply, as in the seed (rejections spread,
 * approvals never do blanket):
 * - `allow_once` approves its own request only; the others keep waiting for their replies;
 * - `allow_always` adds its rule and re-evaluates the others against the rules now in force: a
 *   configured deny still wins, those the new rule allows are allowed, those that still need
 *   asking keep waiting;
 * - `deny` and `deny_with_feedback` answer every pending request of the session alike.
 */
export class PermissionBroker {
  private readonly options: PermissionOptions;
  private readonly always = new Set<string>();
  private readonly pending = new Map<string, Pending>();

  private readonly unconfigured: Unconfigured | undefined;

  /** `unconfigured`: the agent has no `permissions` option; its rule replaces `options`. */
  constructor(options: PermissionOptions, unconfigured?: Unconfigured) {
    this.options = options;
    this.unconfigured = unconfigured;
  }

  /** The agent has no `permissions` option: nothing is ever asked (see {@link Unconfigured}). */
  get unasked(): boolean {
    return this.unconfigured !== undefined;
  }

  /** What policy says now, without asking. This is a pure function of the broker's rules. */
  evaluate(tool: string, risk: Risk): PermissionAction {
    if (this.unconfigured)
      return risk === "high" && this.unconfigured.declaresHigh(tool) ? "deny" : "allow";
    for (const rule of this.options.rules ?? []) {
      if (rule.action !== "deny") continue;
      if (matches(rule, tool, risk)) return "deny";
    }
    if (this.always.has(tool)) return "allow";
    for (const rule of this.options.rules ?? []) if (matches(rule, tool, risk)) return rule.action;
    return this.options.defaults?.[risk] ?? DEFAULTS[risk];
  }

  /** Decides one request: at once by policy, or after a reply. */
  request(request: PermissionRequest): Promise<Decided> {
    const action = this.evaluate(request.tool, request.risk);
    if (action === "allow") return Promise.resolve({ decision: { type: "allow" }, source: POLICY });
    if (action === "deny" && this.unconfigured) {
      this.unconfigured.onProblem(unconfiguredProblem(request.tool));
      return Promise.resolve({ decision: unconfiguredDenied(request.tool), source: POLICY });
    }
    if (action === "deny") {
      return Promise.resolve({ decision: policyDenied(request.tool), source: POLICY });
    }
    const ask = this.options.ask;
    if (!ask) {
      return Promise.resolve({
        decision: {
          type: "corrected",
          feedback: `${request.tool} (risk ${request.risk}) needs the user's approval and no one can approve it in this session. Use a lower-risk tool or tell the user what you need.`,
        },
        source: POLICY,
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
   * Applies a reply to its request and, as the reply says (see the class), to the other pending
   * requests of the session. Returns false, changing nothing, when no request with that id is
   * waiting (unknown, or already answered).
   */
  reply(requestId: string, reply: PermissionReply): boolean {
    const origin = this.pending.get(requestId);
    if (!origin) return false;
    this.pending.delete(requestId);
    const own: DecisionSource = { type: "reply", reply: reply.type };
    const spread: DecisionSource = { type: "spread", reply: reply.type, by: requestId };
    if (reply.type === "allow_once") {
      origin.resolve({ decision: { type: "allow" }, source: own });
      return true;
    }
    if (reply.type === "allow_always") {
      this.always.add(origin.request.tool);
      // Its own request too goes through the rules: a configured deny still wins.
      const answer = (p: Pending, source: DecisionSource) => {
        const action = this.evaluate(p.request.tool, p.request.risk);
        if (action === "ask") return false;
        p.resolve({
          decision: action === "allow" ? { type: "allow" } : policyDenied(p.request.tool),
          source,
        });
        return true;
      };
      answer(origin, own); // allowed by the new rule, or denied by a configured one

      for (const [id, p] of this.pending) if (answer(p, spread)) this.pending.delete(id);
      return true;
    }
    const decision: PermissionDecision =
      reply.type === "deny"
        ? { type: "declined", reason: `permission to run ${origin.request.tool} was declined` }
        : { type: "corrected", feedback: `the user declined this call: ${reply.feedback}` };
    const others = [...this.pending.values()];
    this.pending.clear();
    origin.resolve({ decision, source: own });
    for (const p of others) p.resolve({ decision, source: spread });
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
    for (const p of all) p.resolve({ decision: { type: "declined", reason }, source: TURN_ENDED });
  }
}

const TURN_ENDED: DecisionSource = Object.freeze({ type: "turn_ended" });

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
): Promise<{ call: PreparedCall; decision: PermissionDecision; source: DecisionSource }[]> {
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
      const { decision, source } = await broker.request(request);
      emit({
        type: "permission.decided",
        requestId: request.requestId,
        callId: call.id,
        tool: call.name,
        decision,
        source,
      });
      return { call, decision, source };
    }),
  );
}

/** The permission events `decideAll` reports (members of `AgentEvent` without session stamps). */
export type PermissionEvent =
  | { type: "permission.requested"; request: PermissionRequest }
  | {
      type: "permission.decided";
      requestId: string;
      callId: string;
      tool: string;
      decision: PermissionDecision;
      source: DecisionSource;
    };
