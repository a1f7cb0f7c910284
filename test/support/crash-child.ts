// A child process for crash tests: runs one scenario on a SQLite session and blocks at the
// moment to crash, printing "READY <scenario>" on stdout; the parent then kills it (SIGKILL).
import { createAgent } from "../../actors/agent.ts";
import { type ScriptStep, scriptedModel } from "../../providers/scripted-model.ts";
import { sqliteLedger } from "../../session/stores/sqlite-ledger.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";
import { crashTools } from "./crash-tools.ts";

const [dbPath, dir, scenario] = process.argv.slice(2);
const store = sqliteStore(dbPath, { durability: "process" });
const ledger = sqliteLedger(store, { clock: { now: () => Date.now(), setTimeout, clearTimeout } });
const ready = () => process.stdout.write(`READY ${scenario}\n`);
let firstResultDurable: Promise<void> = Promise.resolve();

const tools = crashTools({
  dir,
  ledger,
  afterEffect: async () => {
    await firstResultDurable;
    ready();
    return new Promise<never>(() => {});
  },
});

const scripts: Record<string, ScriptStep[]> = {
  "non-idempotent": [{ toolCalls: [{ id: "m1", name: "mark", arguments: '{"label":"once"}' }] }],
  idempotent: [{ toolCalls: [{ id: "i1", name: "increment", arguments: '{"by":1}' }] }],
  streaming: [{ text: "partial words before the crash", chunkSize: 4, hangAfter: 3 }],
  "parallel-batch": [
    {
      toolCalls: [
        { id: "p1", name: "quick", arguments: "{}" },
        { id: "p2", name: "mark", arguments: '{"label":"second"}' },
      ],
    },
  ],
};
const steps = scripts[scenario];
if (!steps)
  throw new Error(`unknown scenario ${scenario}; one of ${Object.keys(scripts).join(", ")}`);

const session = createAgent({ model: scriptedModel(steps), store, tools }).session("crash");
if (scenario === "parallel-batch") {
  firstResultDurable = new Promise((resolve) => {
    session.subscribe((e) => {
      if (e.type === "call.settled" && e.callId === "p1")
        void session.sessionLog.flush().then(resolve);
    });
  });
}
session.subscribe((e) => {
  // Mid-stream: the attempt's start is durable and some text has streamed.
  if (scenario === "streaming" && e.type === "text.streamed" && e.text.includes("word")) {
    void session.sessionLog.flush().then(ready);
  }
});
void session.prompt("go");
