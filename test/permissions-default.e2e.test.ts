// An agent created without a `permissions` option (docs/permissions.md, "Without a
// permissions option"): a call to a tool that declares risk high — the built-in shell, an MCP
// tool its annotations call destructive or open-world, a tool declared `risk: "high"` — does not
// run; the model gets feedback, the embedder one `onProblem` line naming the option. Other calls
// (a tool with no declared risk included) run as before. Real built-in shell, scripted model.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { builtinTools } from "../tools/builtin/index.ts";
import { defineTool } from "../tools/define-tool.ts";
import { traitsFromAnnotations } from "../tools/mcp/annotations.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const results = (entries: readonly LogEntry[]) =>
  entries.filter((e) => e.type === "call_result") as Extract<LogEntry, { type: "call_result" }>[];

function tool(name: string, ran: string[], traits: Parameters<typeof defineTool>[0]["traits"]) {
  return defineTool({
    name,
    description: `${name}.`,
    parameters: z.object({}),
    ...(traits ? { traits } : {}),
    execute: () => {
      ran.push(name);
      return `${name} done`;
    },
  });
}

/** The lines about permissions (a scripted model reports no usage: its estimated charge is told too). */
const aboutPermissions = (line: string) => /permission/i.test(line);

describe("without a permissions option", () => {
  it("refuses high-risk calls (shell, risk: high, a destructive or open-world MCP tool) with feedback and one onProblem line; the rest run", async () => {
    const ws = mkdtempSync(join(tmpdir(), "keel-perm-default-"));
    dirs.push(ws);
    const ran: string[] = [];
    const problems: string[] = [];
    const shell = builtinTools({ root: ws }).find((t) => t.name === "shell")!;
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "c1", name: "shell", arguments: JSON.stringify({ command: "touch ran" }) },
          { id: "c2", name: "deploy", arguments: "{}" },
          { id: "c3", name: "mcp_write", arguments: "{}" },
          { id: "c4", name: "mcp_fetch", arguments: "{}" },
          { id: "c5", name: "plain", arguments: "{}" },
          { id: "c6", name: "medium", arguments: "{}" },
        ],
      },
      { text: "understood" },
    ]);
    const session = createAgent({
      model,
      tools: [
        shell,
        tool("deploy", ran, { risk: "high" }),
        tool("mcp_write", ran, traitsFromAnnotations({ destructiveHint: true })),
        tool(
          "mcp_fetch",
          ran,
          traitsFromAnnotations({ destructiveHint: false, openWorldHint: true }),
        ),
        tool("plain", ran, undefined),
        tool("medium", ran, { risk: "medium" }),
      ],
      onProblem: (line) => aboutPermissions(line) && problems.push(line),
    }).session();
    const out = await session.prompt("go");
    expect(out.status).toBe("completed");
    expect(ran.sort()).toEqual(["medium", "plain"]);
    expect(existsSync(join(ws, "ran"))).toBe(false);
    const byId = new Map(results(session.entries()).map((r) => [r.callId, r.result]));
    for (const id of ["c1", "c2", "c3", "c4"]) {
      const r = byId.get(id)!;
      expect(r, id).toMatchObject({ ok: false, code: "DENIED" });
      expect(r.ok ? "" : r.message, id).toContain("high-risk tool");
    }
    // The model saw the refusals as the calls' results.
    const second = JSON.stringify(model.requests[1]);
    expect(second).toContain("allows no high-risk call without permission rules");
    // One line for the embedder, naming the option.
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain("permissions");
    expect(problems[0]).toContain('defaults: { high: "allow" }');
    // The decisions are in the log like any permission decision.
    const refused = session
      .entries()
      .filter((e) => e.type === "permission_decision" && e.decision.type === "corrected")
      .map((e) => (e as { callId: string }).callId);
    expect(refused.sort()).toEqual(["c1", "c2", "c3", "c4"]);
  });

  it("a permissions option that allows high risk runs them (the option the line names works)", async () => {
    const ran: string[] = [];
    const problems: string[] = [];
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "deploy", arguments: "{}" }] },
      { text: "ok" },
    ]);
    const session = createAgent({
      model,
      tools: [tool("deploy", ran, { risk: "high" })],
      permissions: { defaults: { high: "allow" } },
      onProblem: (line) => aboutPermissions(line) && problems.push(line),
    }).session();
    await session.prompt("go");
    expect(ran).toEqual(["deploy"]);
    expect(problems).toEqual([]);
  });

  it("an onProblem that throws fails nothing; a second agent tells its own embedder again", async () => {
    const ran: string[] = [];
    const make = (problems: string[]) =>
      createAgent({
        model: scriptedModel([
          { toolCalls: [{ id: "c1", name: "deploy", arguments: "{}" }] },
          { text: "ok" },
          { toolCalls: [{ id: "c2", name: "deploy", arguments: "{}" }] },
          { text: "ok" },
        ]),
        tools: [tool("deploy", ran, { risk: "high" })],
        onProblem: (line) => {
          if (!aboutPermissions(line)) return;
          problems.push(line);
          throw new Error("a broken problem sink");
        },
      }).session();
    const problems: string[] = [];
    const session = make(problems);
    expect((await session.prompt("go")).status).toBe("completed");
    expect((await session.prompt("again")).status).toBe("completed");
    expect(problems).toHaveLength(1);
    const others: string[] = [];
    expect((await make(others).prompt("go")).status).toBe("completed");
    expect(others).toHaveLength(1);
    expect(ran).toEqual([]);
  });
});
