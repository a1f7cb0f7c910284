// The seed's negative case as a real process: the model says the tests pass without fixing
// anything; the turn completes, the process exits 0, and acceptance is failed.
import { createAgent } from "../../actors/agent.ts";
import { scriptedModel } from "../../providers/scripted-model.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";
import { builtinTools } from "../../tools/builtin/index.ts";

const [ws, db] = process.argv.slice(2);
const agent = createAgent({
  model: scriptedModel([{ text: "I fixed add(); all tests pass." }]),
  tools: builtinTools({ root: ws }),
  store: sqliteStore(db),
  acceptance: {
    workspace: ws,
    checks: [{ name: "tests", command: "node add.test.mjs", files: ["add.test.mjs"] }],
  },
});
const session = await agent.openSession("negative");
const result = await session.prompt("Fix add() so the tests pass.");
process.stdout.write(`${JSON.stringify(result)}\n`);
await agent.close();
