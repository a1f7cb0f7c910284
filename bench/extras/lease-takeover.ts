// Lease takeover time after SIGKILL of a session's owner: from the kill to the follower (another
// process) holding the lease, recovered and running. Two paths: same host (the owner's host:pid
// is gone, so the follower takes over at its next poll) and another host (only expiry tells:
// ttl + poll). ttl 3 000 ms, poll 200 ms; 5 trials each on a loopback PostgreSQL.
//   npx tsx bench/extras/lease-takeover.ts
import { postgresStore } from "../../session/stores/postgres-store.ts";
import { startChild } from "../../test/support/pg-procs.ts";
import { startPostgres } from "../../test/support/postgres-server.ts";

const TRIALS = 5;
const env = { KEEL_TEST_TTL: "3000", KEEL_TEST_POLL: "200" };
const server = await startPostgres();
const out = [
  "| owner on | ttl ms | poll ms | trials | takeover ms (min / median / max) |",
  "|---|---:|---:|---:|---|",
];
try {
  for (const [where, owner] of [
    ["the same host", undefined],
    ["another host", "elsewhere"],
  ] as const) {
    const times: number[] = [];
    for (let t = 0; t < TRIALS; t++) {
      const schema = `takeover_${t}_${owner ? "x" : "h"}`;
      const store = await postgresStore(server.url, { schema });
      const a = startChild(["runner", server.url, schema, "T"], {
        ...env,
        ...(owner ? { KEEL_TEST_OWNER: `${owner}-a` } : {}),
      });
      await a.waitFor((l) => l.ev === "role" && l.role === "owner", 30_000);
      const b = startChild(["runner", server.url, schema, "T"], {
        ...env,
        ...(owner ? { KEEL_TEST_OWNER: `${owner}-b` } : {}),
      });
      await b.waitFor((l) => l.ev === "role" && l.role === "follower", 30_000);
      await new Promise((r) => setTimeout(r, 500 + Math.random() * 1000)); // a random phase of the heartbeat
      const killed = performance.now();
      a.child.kill("SIGKILL");
      await b.waitFor((l) => l.ev === "role" && l.role === "owner", 30_000);
      times.push(performance.now() - killed);
      b.child.kill("SIGKILL");
      await store.close();
    }
    times.sort((x, y) => x - y);
    out.push(
      `| ${where} | 3000 | 200 | ${TRIALS} | ${times[0].toFixed(0)} / ${times[2].toFixed(0)} / ${times[4].toFixed(0)} |`,
    );
  }
  console.log(out.join("\n"));
} finally {
  await server.stop();
}
