/**
 * What sending tool examples to the model costs: the tokens of each built-in tool's spec (name,
 * description, JSON Schema, as `registry.modelTools()` sends it on every request) with its
 * examples and with `showExamples: false`, counted with gpt-tokenizer's o200k (gpt-4o's) and
 * cl100k (gpt-4's) encodings. A count, not a timing: the machine's load does not change it.
 *
 *   npx tsx bench/extras/tool-examples.ts            # prints the table
 *   npx tsx bench/extras/tool-examples.ts --write    # also writes bench/TOOL-EXAMPLES.md
 */
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { countTokens as cl100k } from "gpt-tokenizer/encoding/cl100k_base";
import { countTokens as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { builtinTools, createRegistry, defineTool } from "../../index.ts";

const tools = builtinTools({ root: tmpdir() });
const withExamples = createRegistry(tools).modelTools();
const without = createRegistry(
  tools.map((t) => defineTool({ ...t, showExamples: false })),
).modelTools();

const rows: string[] = [];
let total = { o: [0, 0], c: [0, 0] };
for (const [i, spec] of withExamples.entries()) {
  const a = JSON.stringify(spec);
  const b = JSON.stringify(without[i]);
  const o = [o200k(a), o200k(b)];
  const c = [cl100k(a), cl100k(b)];
  total = { o: [total.o[0] + o[0], total.o[1] + o[1]], c: [total.c[0] + c[0], total.c[1] + c[1]] };
  const examples = tools[i].examples?.length ?? 0;
  rows.push(
    `| ${spec.function.name} | ${examples} | ${o[1]} | ${o[0]} | +${o[0] - o[1]} | ${c[1]} | ${c[0]} | +${c[0] - c[1]} |`,
  );
}
const pct = (a: number, b: number) => `${(((a - b) / b) * 100).toFixed(1)} %`;
rows.push(
  `| **all 7** | | ${total.o[1]} | ${total.o[0]} | +${total.o[0] - total.o[1]} (${pct(total.o[0], total.o[1])}) | ${total.c[1]} | ${total.c[0]} | +${total.c[0] - total.c[1]} (${pct(total.c[0], total.c[1])}) |`,
);

const table = [
  "| tool | examples | o200k without | o200k with | o200k cost | cl100k without | cl100k with | cl100k cost |",
  "|---|---:|---:|---:|---:|---:|---:|---:|",
  ...rows,
].join("\n");
console.log(table);

if (process.argv.includes("--write")) {
  const doc = `# Tool examples: what they cost in tokens

Measured by \`npx tsx bench/extras/tool-examples.ts --write\` (${new Date().toISOString().slice(0, 10)}).
Each built-in tool's spec (name, description, JSON Schema) as \`registry.modelTools()\` sends it
on every model request, serialised as JSON, with its examples (one compact JSON line each after
the description, the default) and without (\`showExamples: false\`). A token count, so the
machine (shared, 2 cores) does not affect it. Providers add a few tokens of framing per tool;
that framing is the same with and without examples.

${table}

The examples are paid on every request of a session. A provider's prompt cache covers them
with the rest of the stable prefix (instructions, tools) after the first request.
`;
  writeFileSync(new URL("../TOOL-EXAMPLES.md", import.meta.url), doc);
}
