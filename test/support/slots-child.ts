// A child process for the shared provider-slots tests (test/postgres-provider-slots.e2e.test.ts).
// Modes:
//   run <url> <schema> <baseURL> <sessions> <limit>  start <sessions> sessions together against the
//                                                     loopback OpenAI server; print {ev:"done"} and exit
//   hold <url> <schema> <n> <limit>                   take n slots and keep them (the test kills it);
//                                                     print {ev:"lost", i} when slot i is lost
// Prints one JSON object per line on stdout.
import pg from "pg";
import { createAgent } from "../../actors/agent.ts";
import { postgresProviderSlots } from "../../actors/postgres-provider-slots.ts";
import { openaiModel } from "../../providers/openai-model.ts";

const [mode, url, schema, a, b, c] = process.argv.slice(2);
const say = (o: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ pid: process.pid, ...o })}\n`);
const LEASE = Number(process.env.KEEL_TEST_LEASE ?? 1500);

const pool = new pg.Pool({ connectionString: url, max: 4 });
pool.on("error", () => {}); // the test stops the server at the end

if (mode === "run") {
  const [baseURL, sessions, limit] = [a!, Number(b), Number(c)];
  const slots = postgresProviderSlots(pool, {
    limits: { openai: limit },
    schema,
    leaseMs: LEASE,
    pollMs: 50,
  });
  const model = openaiModel({ model: "fake-model", contextWindow: 32_768, baseURL, apiKey: "k" });
  const agent = createAgent({ model, concurrency: slots });
  let queued = 0;
  say({ ev: "ready" });
  // The parent says when to start, so every child's sessions start together.
  await new Promise((resolve) => process.stdin.once("data", resolve));
  const results = await Promise.all(
    Array.from({ length: sessions }, (_, i) => {
      const session = agent.session(`c${process.pid}-${i}`);
      session.subscribe((e) => {
        if (e.type === "attempt.queued") queued++;
      });
      return session.prompt(`question ${i}`);
    }),
  );
  await agent.close();
  await slots.close();
  say({
    ev: "done",
    completed: results.filter((r) => r.status === "completed").length,
    queued,
  });
  await pool.end();
  process.exit(0);
} else if (mode === "hold") {
  const [n, limit] = [Number(a), Number(b)];
  const slots = postgresProviderSlots(pool, { limits: { openai: limit }, schema, leaseMs: LEASE });
  for (let i = 0; i < n; i++) {
    const release = await slots.acquire("openai", { signal: new AbortController().signal });
    release.lost?.addEventListener("abort", () =>
      say({ ev: "lost", i, message: (release.lost!.reason as Error).message }),
    );
  }
  say({ ev: "held", n });
  setInterval(() => {}, 60_000); // alive until killed
} else {
  say({ ev: "error", message: `unknown mode ${mode}` });
  process.exit(2);
}
