/**
 * Keel's id generator against nanoid, same process, interleaved: ns per id at the default size
 * (16 characters, 96 random bits). `npx tsx bench/extras/ids.ts`
 */
import { nanoid } from "nanoid";
import { createIds } from "../../actors/ids.ts";

const N = 1_000_000;
const ids = createIds();
let sink = 0;
const time = (f: () => string): number => {
  const t = performance.now();
  for (let i = 0; i < N; i++) sink += f().length;
  return ((performance.now() - t) * 1e6) / N;
};
const ratios: number[] = [];
for (let round = 0; round < 7; round++) {
  const a = time(() => nanoid(16));
  const b = time(() => ids());
  ratios.push(b / a);
  console.log(
    `nanoid ${a.toFixed(0)} ns/id, createIds ${b.toFixed(0)} ns/id, ratio ${(b / a).toFixed(2)}×`,
  );
}
ratios.sort((x, y) => x - y);
console.log(`median ratio createIds/nanoid ${ratios[3].toFixed(2)}× (${sink > 0 ? "ok" : ""})`);
