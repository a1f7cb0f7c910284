/**
 * Where a CPU profile's time goes: self time by area (XState, each Keel folder, other packages,
 * Node's internals, the garbage collector) and the functions with the most self time.
 *
 * Run: `KEEL_ENTRY=index.ts R=2000 node --cpu-prof --cpu-prof-dir=/tmp/keel-prof --import tsx
 * bench/extras/prompt-overhead.ts`, then `npx tsx bench/extras/profile-summary.ts
 * /tmp/keel-prof/<file>.cpuprofile [top]`. Profile the sources (`KEEL_ENTRY=index.ts`): the
 * bundle in `dist/` is one file, so its time cannot be told apart by folder.
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: profile-summary.ts <file.cpuprofile> [top]");
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));

/** The area a frame belongs to, from its script URL. */
function areaOf({ functionName, url }: ProfileNode["callFrame"]): string {
  if (!url) {
    if (functionName === "(garbage collector)") return "garbage collector";
    if (functionName === "(idle)") return "idle";
    if (functionName === "(program)") return "V8 (program)";
    return "V8/native";
  }
  if (url.startsWith("node:")) return "Node internals";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return `package ${pkg[1]}`;
  const keel =
    /\/(actors|machines|session|tools|providers|contracts|cli|inspector|client|bench)\//.exec(url);
  if (keel) return `keel ${keel[1]}/`;
  return url.replace(/^file:\/\//, "");
}

const selfUs = new Map<number, number>();
let total = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const dt = profile.timeDeltas[i] ?? 0;
  const id = profile.samples[i]!;
  selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
  total += dt;
}
const areas = new Map<string, number>();
const functions = new Map<string, number>();
for (const [id, us] of selfUs) {
  const frame = byId.get(id)!.callFrame;
  const area = areaOf(frame);
  areas.set(area, (areas.get(area) ?? 0) + us);
  if (area === "idle") continue;
  const where = frame.url
    ? `${frame.url.split("/").slice(-2).join("/")}:${frame.lineNumber + 1}`
    : "";
  const name = `${frame.functionName || "(anonymous)"} ${where}`.trim();
  functions.set(name, (functions.get(name) ?? 0) + us);
}
const busy = total - (areas.get("idle") ?? 0);
const pct = (us: number) => `${((us / busy) * 100).toFixed(1)} %`;
console.log(
  `profile ${file}: ${(total / 1e6).toFixed(2)} s sampled, ${(busy / 1e6).toFixed(2)} s busy`,
);
console.log("\nself time by area (share of busy time)");
for (const [area, us] of [...areas].sort((a, b) => b[1] - a[1])) {
  if (area !== "idle") console.log(`  ${pct(us).padStart(7)}  ${area}`);
}
console.log(`\ntop ${top} functions by self time`);
for (const [name, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`  ${pct(us).padStart(7)}  ${name}`);
}
