/**
 * Which OpenAI tokenizer is faster on Node 20 (gpt-tokenizer vs js-tiktoken, same o200k table),
 * and how far the chars estimate (⌈chars/4⌉) is from the tokenizer's count on a real transcript:
 * a coding session over this repository (the user's asks, the model's calls with their JSON
 * arguments, and the real files it read as tool results).
 *
 *   cd bench && npm install && cd .. && npx tsx bench/extras/tokenizers.ts
 *   (JS_TIKTOKEN=<a folder whose node_modules has js-tiktoken> to use another install)
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { type Message, userText } from "../../contracts/messages.ts";
import { estimateTextTokens, messageTokens } from "../../contracts/tokens.ts";

const root = new URL("../../", import.meta.url);
const require = createRequire(new URL("../package.json", import.meta.url));

function transcript(): Message[] {
  const files = [
    "README.md",
    "machines/turn.machine.ts",
    "actors/turn-run.ts",
    "session/projection.ts",
    "test/turn.e2e.test.ts",
    "package.json",
  ];
  const messages: Message[] = [
    userText("Explain how a turn ends when the user interrupts it, with file references."),
  ];
  files.forEach((path, i) => {
    messages.push({
      role: "assistant",
      content: [
        ...(i === 0
          ? [
              {
                type: "text" as const,
                text: "I'll start from the README, then read the turn chart and its runner.",
              },
            ]
          : []),
        {
          type: "tool-call",
          id: `call_${i}`,
          name: "read_file",
          arguments: JSON.stringify({ path }),
        },
      ],
    });
    messages.push({
      role: "tool",
      content: [
        {
          type: "tool-result",
          callId: `call_${i}`,
          name: "read_file",
          content: readFileSync(new URL(path, root), "utf8"),
        },
      ],
    });
  });
  messages.push({
    role: "assistant",
    content: [
      {
        type: "text",
        text: "An interrupt reaches the turn chart as `turn.interrupt`. In `sampling` it aborts the attempt and waits in `stopping`; in `executing` it cancels the batch and waits for `batch.done`; elsewhere it goes straight to `finalizing`, which settles leftover calls, writes `turn_aborted` and `turn_end`, and flushes the log.",
      },
    ],
  });
  return messages;
}

const time = (f: () => void, rounds: number) => {
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) f();
  return (performance.now() - t0) / rounds;
};

const messages = transcript();
const texts = messages.flatMap((m) =>
  m.role === "system"
    ? [m.content]
    : m.content.flatMap((p) =>
        p.type === "text"
          ? [p.text]
          : p.type === "tool-call"
            ? [p.name, p.arguments]
            : p.type === "tool-result"
              ? [p.content]
              : [],
      ),
);

let t0 = performance.now();
const gpt = require("gpt-tokenizer/cjs/encoding/o200k_base") as {
  countTokens(t: string, o?: unknown): number;
};
const gptLoad = performance.now() - t0;
t0 = performance.now();
// JS_TIKTOKEN: a folder whose node_modules has js-tiktoken (default: bench/'s).
const from = process.env.JS_TIKTOKEN ? createRequire(`${process.env.JS_TIKTOKEN}/x.js`) : require;
const { Tiktoken } = from("js-tiktoken/lite");
const ranks = from("js-tiktoken/ranks/o200k_base");
const tiktoken = new Tiktoken(ranks);
const tikLoad = performance.now() - t0;
const noSpecial = { disallowedSpecial: new Set() };
const countGpt = (t: string) => gpt.countTokens(t, noSpecial);
const countTik = (t: string) => tiktoken.encode(t, [], []).length;
for (const t of texts)
  if (countGpt(t) !== countTik(t)) throw new Error("the two tokenizers disagree");

const chars = texts.reduce((n, t) => n + t.length, 0);
console.log(`transcript: ${messages.length} messages, ${chars} characters`);
console.log("| tokenizer | load ms | ms per transcript (interleaved rounds) |");
console.log("|---|--:|--:|");
let g = 0;
let k = 0;
for (let r = 0; r < 5; r++) {
  g += time(() => texts.forEach(countGpt), 3);
  k += time(() => texts.forEach(countTik), 3);
}
console.log(`| gpt-tokenizer 4.0.0 | ${gptLoad.toFixed(0)} | ${(g / 5).toFixed(1)} |`);
console.log(`| js-tiktoken 1.0.21 | ${tikLoad.toFixed(0)} | ${(k / 5).toFixed(1)} |`);

const kinds: Record<string, { est: number; real: number }> = {};
for (const m of messages) {
  const kind =
    m.role !== "tool"
      ? `${m.role} messages`
      : m.content[0].callId === "call_0"
        ? "prose (README.md)"
        : m.content[0].callId === "call_5"
          ? "JSON (package.json)"
          : "TypeScript (4 files)";
  kinds[kind] ??= { est: 0, real: 0 };
  const k2 = kinds[kind];
  k2.est += messageTokens(m, estimateTextTokens);
  k2.real += messageTokens(m, countGpt);
}
const total = Object.values(kinds).reduce(
  (a, b) => ({ est: a.est + b.est, real: a.real + b.real }),
  { est: 0, real: 0 },
);
console.log("\n| part of the transcript | chars estimate | o200k count | estimate / count |");
console.log("|---|--:|--:|--:|");
for (const [kind, v] of [...Object.entries(kinds), ["whole transcript", total] as const]) {
  console.log(`| ${kind} | ${v.est} | ${v.real} | ${(v.est / v.real).toFixed(3)} |`);
}
