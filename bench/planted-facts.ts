// The mechanical summary, before and after issue 40, on one scripted session: 200 steps with a
// fact planted in every tenth, a compaction every 20 steps whose model summary fails (so the
// mechanical one is written), and the share of the facts planted so far that the model's view
// still holds after each compaction. Both run in this process over the same entries.
//   node --import tsx bench/planted-facts.ts
import { seededIds } from "../actors/ids.ts";
import type { Message } from "../contracts/messages.ts";
import { compactSession } from "../session/compaction.ts";
import { mechanicalSummary } from "../session/compaction-fallback.ts";
import { SessionLog } from "../session/log.ts";
import { memoryStore } from "../session/stores/memory-store.ts";

/** The mechanical summary before issue 40: one line per message, each cut to 160 characters. */
function before(messages: readonly Message[], maxChars: number): string {
  const clip = (t: string) => {
    const flat = t.replace(/\s+/g, " ").trim();
    return flat.length <= 160 ? flat : `${flat.slice(0, 159)}…`;
  };
  const lines = messages.map((m) =>
    m.role === "system"
      ? `- note: ${clip(m.content)}`
      : m.role === "tool"
        ? `- result: ${clip(m.content[0].content)}`
        : `- ${m.role}: ${clip(m.content.map((p) => (p.type === "text" ? p.text : "")).join(""))}`,
  );
  const head = "Mechanical summary (the summary request failed):";
  let size = head.length + lines.reduce((t, l) => t + l.length + 1, 0);
  let from = 0;
  while (size > maxChars && from < lines.length) size -= lines[from++].length + 1;
  return [
    head,
    ...(from ? [`- (${from} older messages left out)`] : []),
    ...lines.slice(from),
  ].join("\n");
}

const clock = {
  now: (() => {
    let t = 0;
    return () => t++;
  })(),
  setTimeout: () => 0,
  clearTimeout: () => {},
};

async function run(summary: (ms: readonly Message[], max: number) => string) {
  const log = await SessionLog.open({
    sessionId: "facts",
    store: memoryStore(),
    clock,
    ids: seededIds(7),
  });
  const planted: string[] = [];
  const kept: number[] = [];
  for (let step = 1; step <= 200; step++) {
    let text = `Step ${step}: ${"context words ".repeat(40)}`;
    if (step % 10 === 0) {
      const fact = `FACT-${step}=${(step * 7919) % 10007}`;
      planted.push(fact);
      // Planted mid-message, as a fact usually is: after the first 300 characters.
      text = `${text.slice(0, 300)} remember ${fact} ${text.slice(300)}`;
    }
    log.append({ type: "user_message", text });
    if (step % 20 === 0) {
      const r = await compactSession(log, {
        summarize: async (ms) => summary(ms, 4000),
        keepRecentTokens: 600,
      });
      if (!r.ok) throw new Error(`${r.code}: ${r.message}`);
      const view = JSON.stringify(log.history());
      kept.push(planted.filter((f) => view.includes(f)).length / planted.length);
    }
  }
  return kept;
}

const a = await run(before);
const b = await run(mechanicalSummary);
console.log("| compaction | facts planted | kept before | kept after |");
console.log("|---|---|---|---|");
for (const [i, x] of a.entries()) {
  console.log(
    `| ${i + 1} | ${(i + 1) * 2} | ${(x * 100).toFixed(0)} % | ${(b[i] * 100).toFixed(0)} % |`,
  );
}
