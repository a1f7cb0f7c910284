// Regular expressions chosen by a model: a linear-time engine on the event loop (re2js, pure JS
// RE2) or V8's own engine in a worker thread with a deadline? Run from bench/ after
// `npm i --no-save re2js@2.10.0`: node extras/pattern-engine.mjs. Results: ../PATTERN-ENGINE.md.
import { Worker } from "node:worker_threads";

let RE2JS;
try {
  ({ RE2JS } = await import("re2js"));
} catch {
  console.error("install re2js first: npm i --no-save re2js@2.10.0 (in bench/)");
  process.exit(2);
}
const t = () => performance.now();
const ms = (s) => (t() - s).toFixed(1);
const text = "const a = function main() { return 1; }\n".repeat(250_000); // 10 MB, 250 000 lines
const lines = text.split("\n");

let s = t();
RE2JS.compile("^(a+)+$")
  .matcher(`${"a".repeat(30)}b`)
  .find();
console.log(`re2js ^(a+)+$ on 30 a's + b: ${ms(s)} ms`);
const re2 = RE2JS.compile("function\\s+main");
s = t();
re2.matcher("x".repeat(10 * 1024 * 1024)).find();
console.log(`re2js one 10 MB line: ${ms(s)} ms`);
s = t();
for (const l of lines) re2.matcher(l).find();
console.log(`re2js 10 MB in 250 000 lines: ${ms(s)} ms (on the event loop)`);
const js = /function\s+main/;
s = t();
for (const l of lines) js.test(l);
console.log(`V8 10 MB in 250 000 lines: ${ms(s)} ms`);

s = t();
const w = new Worker(
  `const {parentPort}=require("node:worker_threads"); parentPort.on("message",(m)=>parentPort.postMessage(new RegExp(m.p).test(m.s)));`,
  { eval: true },
);
await new Promise((r) => w.once("online", r));
console.log(`worker start-up: ${ms(s)} ms`);
for (let i = 0; i < 3; i++) {
  s = t();
  w.postMessage({ p: "x", s: "x" });
  await new Promise((r) => w.once("message", r));
  console.log(`worker round trip ${i + 1}: ${ms(s)} ms`);
}
w.postMessage({ p: "^(a+)+$", s: `${"a".repeat(40)}b` });
await new Promise((r) => setTimeout(r, 100));
s = t();
await w.terminate();
console.log(`terminating a worker stuck in ^(a+)+$: ${ms(s)} ms`);
