/**
 * The per-step cost of OpenTelemetry tracing, side by side in one process, rounds interleaved:
 * - `none`: no telemetry (`@opentelemetry/api` never loaded by Keel);
 * - `no provider`: `openTelemetry()` with no tracer provider registered (spans do not record);
 * - `recording`: a `BasicTracerProvider` whose processor hands every ended span to an exporter
 *   that drops it (the cost of building the spans, not of exporting them).
 * Each round is one prompt of `STEPS` steps, one `touch` call a step, memory store. Prints µs per
 * step (median of rounds) for each, and the ratios to `none`. Measures the sources by default
 * (`KEEL_ENTRY=dist/index.js` for the build). Run:
 *   npx tsx bench/extras/telemetry-overhead.ts            (STEPS=50 R=30 by default)
 * The OTel SDK is a dev dependency of Keel's repository.
 */
import {
  BasicTracerProvider,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import pino from "pino";
import { stepModel, touchTool } from "./keel-prompt.ts";

const entry = process.env.KEEL_ENTRY ?? "index.ts";
const keel = (await import(
  new URL(`../../${entry}`, import.meta.url).href
)) as typeof import("../../index.ts");
const STEPS = Number(process.env.STEPS ?? 50);
const R = Number(process.env.R ?? 30);
const WARM = 5;
const logger = pino({ level: "silent" });
const touch = touchTool(keel);

let exported = 0;
const provider = new BasicTracerProvider({
  spanProcessors: [
    new SimpleSpanProcessor({
      export: (spans: ReadableSpan[], done: (r: { code: 0 }) => void) => {
        exported += spans.length;
        done({ code: 0 });
      },
      shutdown: async () => {},
    }),
  ],
});
const variants = {
  none: undefined,
  "no provider": await keel.openTelemetry(),
  recording: await keel.openTelemetry({ tracer: provider.getTracer("keel-bench") }),
};

const times: Record<string, number[]> = Object.fromEntries(
  Object.keys(variants).map((k) => [k, []]),
);
for (let r = 0; r < R + WARM; r++) {
  for (const [name, telemetry] of Object.entries(variants)) {
    const agent = keel.createAgent({
      model: stepModel(keel, STEPS, 1, `${r}_`),
      tools: [touch],
      store: keel.memoryStore(),
      logger,
      limits: { maxSteps: STEPS + 1 },
      ...(telemetry ? { telemetry } : {}),
    });
    const session = agent.session();
    await session.ready;
    const t0 = performance.now();
    const out = await session.prompt("go");
    const ms = performance.now() - t0;
    await agent.close();
    if (out.status !== "completed") throw new Error(`${name}: prompt ended ${out.status}`);
    if (r >= WARM) times[name].push((ms * 1000) / (STEPS + 1));
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const base = median(times.none);
for (const [name, xs] of Object.entries(times)) {
  const m = median(xs);
  console.log(
    `${name.padEnd(12)} ${m.toFixed(1).padStart(7)} µs/step  ×${(m / base).toFixed(2)} of none`,
  );
}
console.log(
  `(${entry}, ${STEPS} steps + the answer per prompt, ${R} rounds interleaved; ${exported} spans built by "recording")`,
);
