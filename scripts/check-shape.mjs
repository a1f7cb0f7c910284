#!/usr/bin/env node
// The code's shape, checked by `npm run lint` (docs/architecture.md, "The layers"):
// - no shipped source file over MAX_LINES lines, unless it is a named exception below, with the
//   reason it is one concept and a ceiling it may not grow past;
// - no class with more than MAX_MEMBERS public members, with the same kind of exceptions;
// - no function (declaration, method, or a function expression or arrow with a name of its
//   own) over MAX_FUNCTION_LINES lines, with the same kind of exceptions;
// - no import cycle between shipped modules, type-only imports included (a type cycle still
//   means two files that cannot be read one without the other).
// Run: `node scripts/check-shape.mjs [root]`; exits 1 and names each breach.
import { readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

export const MAX_LINES = 500;
export const MAX_MEMBERS = 25;
export const MAX_FUNCTION_LINES = 80;

/** Shipped code: what the package holds and a reader of Keel reads. */
const SHIPPED = [
  "actors",
  "contracts",
  "machines",
  "tools",
  "session",
  "providers",
  "inspector",
  "cli",
  "client",
  "index.ts",
  "testing.ts",
];
const SKIP = new Set(["node_modules", "dist", "page", ".stryker-tmp"]);
const SOURCE = /\.(ts|mts|js|mjs)$/;

/**
 * Files allowed past MAX_LINES: each is one concept that would be harder to read in pieces.
 * `max` is the ceiling it may not grow past (about its size when the rule came in, plus room
 * for a fix); past it, split the file.
 */
export const LONG_FILES = {
  "machines/turn.machine.ts": {
    max: 780,
    why: "one statechart: the turn's states and transitions are read (and model-checked) as one definition; its types are in turn.types.ts, its guards, actions and policies elsewhere",
  },
};

/** Classes allowed past MAX_MEMBERS public members, with why. */
export const WIDE_CLASSES = {
  "session/log.ts:SessionLog": {
    max: 32,
    why: "the session's one source of truth: the write-ahead append and flush path, the fencing it enforces, and the projection reads a turn makes share one in-memory state and one order; split, each part would need the others' internals",
  },
  "actors/session.ts:Session": {
    max: 45,
    why: "the public facade of a session (docs/embedding.md): each member is one documented call that delegates to a part in its own file (session-runner, session-inputs, session-lease, session-acceptance)",
  },
};

/** Functions allowed past MAX_FUNCTION_LINES, by `file:name`, with why and a ceiling. */
export const LONG_FUNCTIONS = {
  "machines/batch.machine.ts:createBatchMachine": {
    max: 130,
    why: "a chart's config: the batch's states and transitions read (and model-checked) as one definition",
  },
  "session/stores/sqlite-statements.ts:sqliteStatements": {
    max: 105,
    why: "a table of the SQLite store's prepared statements, one line of SQL each: data, not steps",
  },
  "cli/main.ts:buildProgram": {
    max: 365,
    why: "the `keel` command table (commander): one declaration per command and option, each a few lines, read as the CLI's reference",
  },
  "actors/telemetry.ts:handle": {
    max: 170,
    why: "one exhaustive switch over the agent's events, a case per event type (a new event type fails typecheck here)",
  },
  "cli/trace.ts:human": {
    max: 190,
    why: "one exhaustive switch over the agent's events, a case per event type, each the line the trace prints",
  },
  "inspector/records.ts:agentRecord": {
    max: 100,
    why: "one exhaustive switch over the agent's events, a case per event type, each the record the inspector shows",
  },
  "providers/arg-preview.ts:push": {
    max: 135,
    why: "the incremental JSON scanner's per-delta loop: one pass over each character, a case per scanner state; a call per state would cost on every delta of a streamed argument",
  },
  "providers/ai-sdk-stream.ts:push": {
    max: 100,
    why: "one exhaustive switch over the AI SDK's stream part types, a case per part type",
  },
  "providers/stream-assembler.ts:push": {
    max: 90,
    why: "one exhaustive switch over the model event types, a case per event, on the per-delta path",
  },
  "inspector/replay.ts:replayRecords": {
    max: 280,
    why: "the hand-written replay being replaced by replay through the shipped charts (issue 36); its replacement is held to the rule",
  },
  "actors/model-attempt.ts:failAttempt": {
    max: 110,
    why: "the decision after a failed attempt is moving into the turn chart (issue 36, the turn decides retry); split then, not twice",
  },
  "actors/agent.ts:createAgent": {
    max: 95,
    why: "the agent's wiring: each option checked and handed to the part that uses it, in the order the parts depend on each other",
  },
  "inspector/server.ts:startInspector": {
    max: 95,
    why: "the inspector server's routes, one short handler each, read as the page's API",
  },
  "cli/demo.ts:runDemo": {
    max: 85,
    why: "the demo's script: the steps a newcomer watches, in order",
  },
  "cli/eval.ts:runEval": {
    max: 95,
    why: "`keel eval`'s one run: tasks × arms × tries, then the report",
  },
  "cli/run.ts:runPrompt": {
    max: 100,
    why: "`keel run`'s one prompt: open, subscribe the trace, prompt, print, close",
  },
  "cli/serve/server.ts:handleFrame": {
    max: 100,
    why: "one exhaustive switch over the control protocol's request types (docs/protocol.md), a case per request",
  },
  "tools/prepare-call.ts:prepare": {
    max: 110,
    why: "the preparation steps in their documented order (docs/tools.md: parse, split, unwrap, wrap, remap, alias, validate), each a call",
  },
  "tools/builtin/grep.ts:execute": {
    max: 100,
    why: "grep's walk, match and output budget in one pass over the files",
  },
  "tools/builtin/shell.ts:runCommandInGroup": {
    max: 100,
    why: "one child process's life: spawn in its group, stream, time out, kill the group, settle once",
  },
  "session/redaction.ts:redactEntry": {
    max: 115,
    why: "one exhaustive switch over the log's entry types, a case per type that holds content",
  },
  "session/stores/sqlite-store.ts:sqliteStore": {
    max: 125,
    why: "the store's open path: file, migrations, lease, group commit, in the order they depend on each other; its methods are measured each on its own",
  },
  "actors/worker.ts:startWorker": {
    max: 90,
    why: "the worker's wiring: its job queue, sweep, leases and shutdown in the order they depend on each other; its handlers are measured each on its own",
  },
  "tools/builtin/common.ts:openWorkspaceFile": {
    max: 95,
    why: "one open of a workspace file against a folder swapped for a symlink mid-call: resolve, open, read the handle's real path, refuse, in one sequence whose steps share the open handle",
  },
  "cli/serve/session-table.ts:open": {
    max: 90,
    why: "the protocol's session.open: each of its options checked and handed to the agent, in the order the protocol documents them",
  },
  "cli/serve-command.ts:addServeCommand": {
    max: 100,
    why: "`keel serve`'s declaration (commander): one option per line for both transports, read as the command's reference",
  },
};

/**
 * The named functions of a source text with their length in lines: declarations, methods,
 * accessors, and function expressions or arrows bound to a name (a variable, a property). An
 * anonymous callback counts toward the function it is written in; a named function written
 * inside another counts on its own, not toward it (a factory that returns methods is measured
 * like a class: each method on its own).
 */
export function functionsOf(text, fileName = "file.ts") {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const lines = (node) =>
    source.getLineAndCharacterOfPosition(node.getEnd()).line -
    source.getLineAndCharacterOfPosition(node.getStart(source)).line +
    1;
  const nameOf = (node) => {
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isGetAccessorDeclaration(node) ||
      ts.isSetAccessorDeclaration(node)
    ) {
      return node.name?.getText(source);
    }
    if (ts.isConstructorDeclaration(node)) return "constructor";
    if ((ts.isArrowFunction(node) || ts.isFunctionExpression(node)) && node.parent) {
      const p = node.parent;
      if (
        (ts.isVariableDeclaration(p) ||
          ts.isPropertyAssignment(p) ||
          ts.isPropertyDeclaration(p)) &&
        p.name
      ) {
        return p.name.getText(source);
      }
    }
    return undefined;
  };
  // Each named function's entry, and the enclosing one whose own lines its lines leave.
  const visit = (node, enclosing) => {
    const name = nameOf(node);
    if (name !== undefined && node.body) {
      const entry = { name, lines: lines(node) };
      if (enclosing) enclosing.lines -= entry.lines;
      found.push(entry);
      ts.forEachChild(node, (child) => visit(child, entry));
      return;
    }
    ts.forEachChild(node, (child) => visit(child, enclosing));
  };
  visit(source, undefined);
  return found;
}

function* files(dir, root) {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) yield* files(full, root);
    else if (SOURCE.test(name) && !name.endsWith(".d.ts"))
      yield path.relative(root, full).split(path.sep).join("/");
  }
}

/** The shipped source files under `root`, as `folder/file.ts`. */
export function shippedFiles(root) {
  const out = [];
  for (const entry of SHIPPED) {
    const full = path.join(root, entry);
    try {
      if (statSync(full).isDirectory()) out.push(...files(full, root));
      else out.push(entry);
    } catch {
      // an entry this checkout does not have
    }
  }
  return out;
}

/** Lines of a source text (a final newline does not start a line). */
export function lineCount(text) {
  if (text.length === 0) return 0;
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

/**
 * The classes of a source text and their public members: methods, properties, accessors (a
 * get/set pair is one member) and constructor parameter properties; not `private`,
 * `protected`, `#private` or the constructor itself.
 */
export function classesOf(text, fileName = "file.ts") {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const hidden = (node) =>
    (ts.getCombinedModifierFlags(node) &
      (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) !==
      0 ||
    (node.name !== undefined && ts.isPrivateIdentifier(node.name));
  const visit = (node) => {
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      const names = new Set();
      for (const member of node.members) {
        if (ts.isConstructorDeclaration(member)) {
          for (const p of member.parameters) {
            const flags = ts.getCombinedModifierFlags(p);
            const property =
              flags &
              (ts.ModifierFlags.Public |
                ts.ModifierFlags.Readonly |
                ts.ModifierFlags.Private |
                ts.ModifierFlags.Protected);
            if (property && !hidden(p)) names.add(p.name.getText(source));
          }
          continue;
        }
        if (ts.isClassStaticBlockDeclaration(member) || ts.isIndexSignatureDeclaration(member))
          continue;
        if (hidden(member) || !member.name) continue;
        names.add(member.name.getText(source));
      }
      found.push({ name: node.name?.getText(source) ?? "(anonymous)", members: [...names] });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const IMPORT =
  /(?:^|[\s;])(?:import|export)(?:[\s\w{},*]*?from\s*)?\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;

/** The relative import specifiers of a text, type-only ones included (comments removed). */
function relativeImports(text) {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
  return [...code.matchAll(IMPORT)].map((m) => m[1] ?? m[2]).filter((s) => s.startsWith("."));
}

/**
 * The import cycles among `graph`'s modules (`module → modules it imports`): each strongly
 * connected component of more than one module, or a module importing itself, as one cycle
 * through it (Tarjan's algorithm, then a shortest path back to the start).
 */
export function cyclesOf(graph) {
  let index = 0;
  const order = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const components = [];
  const strong = (v) => {
    order.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!order.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), order.get(w)));
    }
    if (low.get(v) === order.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      const selfLoop = component.length === 1 && (graph.get(v) ?? []).includes(v);
      if (component.length > 1 || selfLoop) components.push(component);
    }
  };
  for (const v of [...graph.keys()].sort()) if (!order.has(v)) strong(v);
  return components.map((component) => {
    const inside = new Set(component);
    const start = [...component].sort()[0];
    // Breadth-first from start's neighbours back to start, inside the component.
    const previous = new Map();
    const queue = [];
    for (const w of graph.get(start) ?? []) {
      if (inside.has(w) && !previous.has(w)) {
        previous.set(w, start);
        queue.push(w);
      }
    }
    while (queue.length > 0 && !previous.has(start)) {
      const v = queue.shift();
      for (const w of graph.get(v) ?? []) {
        if (inside.has(w) && !previous.has(w)) {
          previous.set(w, v);
          queue.push(w);
        }
      }
    }
    const path = [start];
    for (let v = previous.get(start); v !== start; v = previous.get(v)) path.unshift(v);
    path.unshift(start);
    return path;
  });
}

/** The named exceptions that name a file or class `root` does not have (an exception outlives its file). */
export function staleExceptions(root) {
  const stale = [];
  const have = new Set(shippedFiles(root));
  for (const file of Object.keys(LONG_FILES)) {
    if (!have.has(file)) stale.push(`LONG_FILES names ${file}, which does not exist`);
  }
  for (const key of Object.keys(LONG_FUNCTIONS)) {
    const [file, name] = key.split(":");
    const text = have.has(file) ? readFileSync(path.join(root, file), "utf8") : "";
    if (!functionsOf(text, file).some((f) => f.name === name)) {
      stale.push(`LONG_FUNCTIONS names ${key}, which does not exist`);
    }
  }
  for (const key of Object.keys(WIDE_CLASSES)) {
    const [file, name] = key.split(":");
    const text = have.has(file) ? readFileSync(path.join(root, file), "utf8") : "";
    if (!classesOf(text, file).some((c) => c.name === name)) {
      stale.push(`WIDE_CLASSES names ${key}, which does not exist`);
    }
  }
  return stale;
}

/** Each breach of the shape rules under `root`, one message each. */
export function breaches(root) {
  const found = [];
  const graph = new Map();
  for (const file of shippedFiles(root)) {
    const text = readFileSync(path.join(root, file), "utf8");
    const lines = lineCount(text);
    const long = LONG_FILES[file];
    if (long && lines > long.max) {
      found.push(
        `${file}: ${lines} lines, past its ceiling of ${long.max} (${long.why}); split it`,
      );
    } else if (!long && lines > MAX_LINES) {
      found.push(
        `${file}: ${lines} lines (the rule is ${MAX_LINES}); split it along a seam, or name it in LONG_FILES with why it is one concept`,
      );
    }
    for (const c of /\bclass\b/.test(text) ? classesOf(text, file) : []) {
      const wide = WIDE_CLASSES[`${file}:${c.name}`];
      const max = wide?.max ?? MAX_MEMBERS;
      if (c.members.length > max) {
        found.push(
          `${file}: class ${c.name} has ${c.members.length} public members (the rule is ${max}); move a concern out, or name it in WIDE_CLASSES with why`,
        );
      }
    }
    for (const f of functionsOf(text, file)) {
      const named = LONG_FUNCTIONS[`${file}:${f.name}`];
      const max = named?.max ?? MAX_FUNCTION_LINES;
      if (f.lines > max) {
        found.push(
          `${file}: function ${f.name} has ${f.lines} lines (the rule is ${max}); split it into named steps, or name it in LONG_FUNCTIONS with why`,
        );
      }
    }
    graph.set(
      file,
      relativeImports(text).map((spec) =>
        path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)),
      ),
    );
  }
  for (const cycle of cyclesOf(graph)) {
    found.push(`import cycle (type-only imports count): ${cycle.join(" → ")}`);
  }
  return found;
}

// Run as a script (a path with spaces or a symlink included), not imported by a test.
if (
  process.argv[1] &&
  realpathSync(fileURLToPath(import.meta.url)) === realpathSync(process.argv[1])
) {
  const root = path.resolve(process.argv[2] ?? path.join(path.dirname(process.argv[1]), ".."));
  const found = [...breaches(root), ...staleExceptions(root)];
  for (const b of found) console.error(`shape: ${b}`);
  if (found.length > 0) {
    console.error(`${found.length} shape breach(es): see "The layers" in docs/architecture.md`);
    process.exit(1);
  }
  console.log(
    `shape: no file over ${MAX_LINES} lines or class over ${MAX_MEMBERS} public members but the named ones, no import cycle`,
  );
}
