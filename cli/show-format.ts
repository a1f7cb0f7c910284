import { type ChatMessage, type LogEntry, textOf, toolCallsOf } from "../index.ts";
import { printable } from "./shown-text.ts";

/** One line of at most `max` characters; controls (escape sequences) shown escaped. */
const clip = (text: string, max = 80) => {
  const flat = printable(text.replace(/\s+/g, " ").trim(), false);
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

/** One line describing an entry. This is a pure function. */
export function describeEntry(e: LogEntry): string {
  switch (e.type) {
    case "user_message":
      return `user "${clip(e.text)}"`;
    case "turn_start":
      return `turn ${e.turnId}`;
    case "attempt_start":
      return `attempt ${e.attemptId} step ${e.step}`;
    case "attempt_end":
      return `attempt ${e.status}${e.error ? `: ${clip(e.error, 60)}` : ""}`;
    case "assistant_message": {
      const calls = toolCallsOf(e.content)
        .map((c) => c.name)
        .join(", ");
      const text = textOf(e.content);
      return `assistant${text ? ` "${clip(text, 60)}"` : ""}${calls ? ` → ${calls}` : ""} [${e.finishReason}]`;
    }
    case "call_started":
      return `▶ ${e.name} ${clip(JSON.stringify(e.args) ?? "", 60)}`;
    case "call_result": {
      const r = e.result;
      return `${e.outcome === "completed" ? "✓" : "✗"} ${e.name} ${e.outcome}: ${clip(r.ok ? r.content : `${r.code} ${r.message}`, 60)}`;
    }
    case "permission_decision": {
      const d = e.decision;
      const what =
        d.type === "allow"
          ? "allowed"
          : d.type === "declined"
            ? "declined"
            : "denied with feedback";
      const by =
        e.source.type === "spread"
          ? `${e.source.reply} to ${e.source.by}`
          : e.source.type === "reply"
            ? e.source.reply
            : e.source.type;
      return `permission ${e.tool} (${e.callId}) ${what} by ${by}`;
    }
    case "permission_request":
      return `permission ${e.tool} (${e.callId}) asked as ${e.requestId}${e.deadlineAt !== undefined ? ` until ${new Date(e.deadlineAt).toISOString()}` : ""}`;
    case "turn_continued":
      return `turn ${e.turnId} continued after a crash (${e.continuation}): ${clip(e.where, 60)}`;
    case "context_edit":
      return `edit ${e.targetId} ${e.replacement === null ? "removed" : "replaced"}`;
    case "compaction":
      return `compaction "${clip(e.summary, 50)}" (first kept ${e.firstKeptId})`;
    case "settings":
      return `settings ${clip(JSON.stringify(e.settings), 60)}`;
    case "inbox":
      return `inbox ${e.lane} from ${e.source}: "${clip(e.body, 50)}"`;
    case "inbox_consumed":
      return `inbox consumed ${e.inboxId}`;
    case "turn_end":
      return `turn ${e.status}${e.reason ? `: ${clip(e.reason, 60)}` : ""}`;
    case "turn_aborted":
      return `turn aborted at ${e.where}`;
    case "leaf":
      return `leaf → ${e.leafId ?? "root"} (${e.reason})`;
    case "note":
      return `note "${clip(e.text, 60)}"`;
    case "acceptance_spec":
      return `acceptance spec v${e.version}: ${e.checks.map((c) => c.name).join(", ")}${e.files.length ? ` (frozen: ${e.files.map((f) => f.path).join(", ")})` : ""}`;
    case "acceptance":
      return `acceptance ${e.acceptance} (${e.reason}${e.rounds ? `, ${e.rounds} follow-up(s)` : ""}${e.interrupted ? ", interrupted" : ""}): ${e.evidence.checks.map((c) => `${c.passed ? "✓" : "✗"}${c.name}`).join(" ")}`;
    case "handoff":
      return `handoff: ${e.record.verified.length} verified, ${e.record.unverified.length} unverified, ${e.record.nextSteps.length} next steps`;
  }
}

/**
 * The log as a tree: a chain of entries stays in one column; where an entry has several
 * children each branch is indented under `├─`/`└─`. Entries on the active path (root → leaf)
 * are marked `●`, others `○`. Iterative, so long logs do not overflow the stack.
 * This is a pure function.
 */
export function renderTree(entries: readonly LogEntry[], leafId: string | null): string {
  const byId = new Map(entries.map((e) => [e.id, e]));
  const active = new Set<string>();
  for (let id = leafId; id !== null; id = byId.get(id)?.parentId ?? null) {
    if (active.has(id) || !byId.has(id)) break;
    active.add(id);
  }
  const children = new Map<string | null, LogEntry[]>();
  for (const e of entries) {
    const parent = e.parentId !== null && byId.has(e.parentId) ? e.parentId : null;
    const list = children.get(parent) ?? [];
    list.push(e);
    children.set(parent, list);
  }
  const width = String(entries.at(-1)?.seq ?? 0).length;
  const lines: string[] = [];
  const stack: { entry: LogEntry; indent: string; branch: string }[] = [];
  const pushKids = (parent: string | null, indent: string) => {
    const kids = children.get(parent) ?? [];
    if (kids.length === 1) {
      stack.push({ entry: kids[0], indent, branch: "" });
      return;
    }
    for (let i = kids.length - 1; i >= 0; i--) {
      const last = i === kids.length - 1;
      stack.push({
        entry: kids[i],
        indent: `${indent}${last ? "   " : "│  "}`,
        branch: `${indent}${last ? "└─ " : "├─ "}`,
      });
    }
  };
  pushKids(null, "");
  while (stack.length > 0) {
    const { entry, indent, branch } = stack.pop()!;
    const mark = active.has(entry.id) ? "●" : "○";
    lines.push(
      `${String(entry.seq).padStart(width)} ${branch || indent}${mark} ${printable(describeEntry(entry), false)}`,
    );
    pushKids(entry.id, indent);
  }
  return lines.join("\n");
}

/** The projection, one message per line (tool calls and results shown by id). Pure. */
export function renderProjection(messages: readonly ChatMessage[]): string {
  return messages.map((m) => printable(projectionLine(m), false)).join("\n");
}

function projectionLine(m: ChatMessage): string {
  if (m.role === "tool") return `  tool[${m.tool_call_id}]: ${clip(m.content, 100)}`;
  if (m.role === "assistant") {
    const calls = (m.tool_calls ?? []).map((c) => `${c.function.name}#${c.id}`).join(", ");
    return `  assistant: ${clip(m.content ?? "", 80)}${calls ? ` → ${calls}` : ""}`;
  }
  const content = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
  return `  ${m.role}: ${clip(content, 100)}`;
}
