// A keel/client process for the crash test: spawns `keel serve --stdio` on a SQLite store,
// starts a turn whose client tool never answers, prints the server's pid, and waits to be
// killed (SIGKILL): its server must then settle, flush and exit on its own.
import { connect } from "../../client/index.ts";

const [store, scriptFile] = process.argv.slice(2);
const client = await connect({
  args: ["--store", store, "--provider", "scripted", "--script", scriptFile],
  stderr: "inherit",
});
const session = await client.openSession({
  sessionId: "crash",
  tools: [
    {
      name: "get_weather",
      description: "The weather in a city (never answers: the test kills this process).",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      traits: { risk: "low" },
      execute: () => {
        process.stdout.write(`${JSON.stringify({ serverPid: client.process?.pid })}\n`);
        return new Promise<string>(() => {});
      },
    },
  ],
});
void session.prompt("Weather in Oslo and Rome?").catch(() => {});
