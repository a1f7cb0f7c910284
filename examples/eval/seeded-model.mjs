// A scripted model for `keel eval`: in run r of a task it fixes add() iff a seeded draw is below
// the task's chance P (mulberry32; the same seed gives the same runs). "flaky" answers 503s instead.
const P = { easy: 0.8, hard: 0.3, flaky: 0.5 };
const TASKS = Object.keys(P);
function mulberry32(a) {
  a |= 0;
  a = (a + 0x6d2b79f5) | 0;
  let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
export default ({ task, run, seed }) => {
  const fix = mulberry32(seed * 7919 + TASKS.indexOf(task) * 131 + run) < P[task];
  let requests = 0;
  return {
    name: "seeded",
    async *stream() {
      requests++;
      if (!fix && task === "flaky") {
        const err = new Error("upstream overloaded");
        err.status = 503;
        throw err;
      }
      yield { type: "usage", usage: { inputTokens: 100, outputTokens: 10 } };
      if (fix && requests === 1) {
        const args = JSON.stringify({
          path: "add.mjs",
          content: "export const add = (a, b) => a + b;\n",
        });
        yield { type: "call.start", index: 0, id: "fix", name: "write_file" };
        yield { type: "call.delta", index: 0, argumentsDelta: args };
        yield { type: "call.end", index: 0 };
        yield { type: "finish", reason: "tool_calls" };
        return;
      }
      yield { type: "text.delta", text: "All tests pass." };
      yield { type: "finish", reason: "stop" };
    },
  };
};
