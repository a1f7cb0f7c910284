import { describe, expect, it, vi } from "vitest";
import { type CommitOutcome, GroupCommit } from "../session/stores/group-commit.ts";

interface Item {
  key: string;
  n: number;
}

/** A committer whose commits the test ends by hand; records every group it was given. */
function harness(start: "microtask" | "immediate" = "microtask") {
  const groups: Item[][] = [];
  const ends: ((outcomes: readonly CommitOutcome[] | Error) => void)[] = [];
  const committer = new GroupCommit<Item>({
    start,
    key: (item) => item.key,
    commit: (group) => {
      groups.push([...group]);
      return new Promise<readonly CommitOutcome[]>((resolve, reject) =>
        ends.push((o) => (o instanceof Error ? reject(o) : resolve(o))),
      );
    },
  });
  const settled = new Map<number, "resolved" | Error>();
  const submit = (key: string, n: number) => {
    const p = committer.submit({ key, n });
    p.then(
      () => settled.set(n, "resolved"),
      (e: Error) => settled.set(n, e),
    );
    return p.catch(() => {});
  };
  const tick = () => new Promise((r) => setImmediate(r));
  return { committer, groups, ends, settled, submit, tick };
}

describe("GroupCommit", () => {
  it("a caller's promise settles only once the commit that holds its item has resolved", async () => {
    const h = harness();
    h.submit("a", 1);
    h.submit("b", 2);
    await h.tick();
    expect(h.groups).toEqual([
      [
        { key: "a", n: 1 },
        { key: "b", n: 2 },
      ],
    ]);
    await h.tick();
    expect(h.settled.size).toBe(0); // in flight: nobody is told it is durable
    h.ends[0]([undefined, undefined]);
    await h.tick();
    expect([...h.settled]).toEqual([
      [1, "resolved"],
      [2, "resolved"],
    ]);
  });

  it("appends that arrive while a commit is in flight are committed together in the next one", async () => {
    const h = harness();
    h.submit("a", 1);
    await h.tick();
    h.submit("b", 2);
    h.submit("c", 3);
    await h.tick();
    h.submit("d", 4);
    expect(h.groups).toHaveLength(1); // one in flight at a time
    h.ends[0]([undefined]);
    await h.tick();
    expect(h.groups.map((g) => g.map((i) => i.n))).toEqual([[1], [2, 3, 4]]);
    expect(h.settled.get(1)).toBe("resolved");
    expect(h.settled.has(2)).toBe(false);
    h.ends[1]([undefined, undefined, undefined]);
    await h.tick();
    expect(h.settled.size).toBe(4);
    expect(h.committer.stats).toEqual({ groups: 2, items: 4, largest: 3 });
  });

  it("a refusal settles only its own caller: the rest of the group resolves", async () => {
    const h = harness();
    for (let n = 1; n <= 4; n++) h.submit(`s${n}`, n);
    await h.tick();
    const fenced = new Error("fenced");
    h.ends[0]([undefined, fenced, undefined, undefined]);
    await h.tick();
    expect([...h.settled].sort()).toEqual([
      [1, "resolved"],
      [2, fenced],
      [3, "resolved"],
      [4, "resolved"],
    ]);
  });

  it("a group that fails as a whole refuses every item in it, and the next group still runs", async () => {
    const h = harness();
    h.submit("a", 1);
    h.submit("b", 2);
    await h.tick();
    h.submit("c", 3);
    const io = new Error("disk full");
    h.ends[0](io);
    await h.tick();
    expect(h.settled.get(1)).toBe(io);
    expect(h.settled.get(2)).toBe(io);
    expect(h.groups).toHaveLength(2);
    h.ends[1]([undefined]);
    await h.tick();
    expect(h.settled.get(3)).toBe("resolved");
  });

  it("a commit that throws synchronously refuses its group", async () => {
    const committer = new GroupCommit<Item>({
      start: "immediate",
      key: (i) => i.key,
      commit: () => {
        throw new Error("locked");
      },
    });
    await expect(committer.submit({ key: "a", n: 1 })).rejects.toThrow("locked");
    expect(committer.pending).toBe(0);
  });

  it("two appends of one session never share a group and commit in the order they were called", async () => {
    const h = harness("immediate");
    h.submit("a", 1);
    h.submit("b", 2);
    h.submit("a", 3);
    h.submit("a", 4);
    await h.tick();
    expect(h.groups.map((g) => g.map((i) => i.n))).toEqual([[1, 2]]);
    h.ends[0]([undefined, undefined]);
    await h.tick();
    h.ends[1]([undefined]);
    await h.tick();
    h.ends[2]([undefined]);
    await h.tick();
    expect(h.groups.map((g) => g.map((i) => i.n))).toEqual([[1, 2], [3], [4]]);
    expect(h.settled.size).toBe(4);
  });

  it("'immediate' gathers every append called before the event loop's next check phase", async () => {
    const h = harness("immediate");
    // Two sessions overlap (b arrives while a's group is pending): writers are concurrent.
    h.submit("a", 0);
    h.submit("b", 0);
    await h.tick();
    h.ends[0]([undefined, undefined]);
    await h.tick();
    h.submit("a", 1);
    await Promise.resolve();
    h.submit("b", 2);
    queueMicrotask(() => h.submit("c", 3));
    await h.tick();
    expect(h.groups.map((g) => g.map((i) => i.n))).toEqual([
      [0, 0],
      [1, 2, 3],
    ]);
  });

  it("'immediate' with a lone writer starts at once (nobody would join it), yet lets the event loop turn every 10 ms", async () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    try {
      const h = harness("immediate");
      const microtasks = () => Promise.resolve().then(() => Promise.resolve());
      // The first group waits for the check phase: the loop has not turned for this committer.
      h.submit("a", 1);
      await microtasks();
      expect(h.groups).toHaveLength(0);
      await h.tick();
      expect(h.groups.map((g) => g.map((i) => i.n))).toEqual([[1]]);
      h.ends[0]([undefined]);
      await h.tick();
      // Alone, within 10 ms of that turn: the next group goes out before the check phase.
      h.submit("a", 2);
      await microtasks();
      expect(h.groups.map((g) => g.map((i) => i.n))).toEqual([[1], [2]]);
      h.ends[1]([undefined]);
      await h.tick();
      // Sessions that write one after another (the committer idle between them) are alone too.
      h.submit("b", 3);
      await microtasks();
      expect(h.groups).toHaveLength(3);
      // 10 ms later without a turn of the loop: this one waits for the check phase.
      vi.advanceTimersByTime(11);
      h.ends[2]([undefined]);
      await h.tick();
      h.submit("b", 4);
      await microtasks();
      expect(h.groups).toHaveLength(3);
      await h.tick();
      expect(h.groups).toHaveLength(4);
      // Another key arriving while b's commit is in flight: concurrent now, so the next group
      // waits for the check phase and gathers, though the loop turned just before.
      h.submit("c", 5);
      h.ends[3]([undefined]);
      await h.tick();
      h.ends[4]([undefined]);
      await h.tick();
      h.submit("a", 6);
      await microtasks();
      expect(h.groups).toHaveLength(5);
      h.submit("b", 7);
      await h.tick();
      expect(h.groups.map((g) => g.map((i) => i.n))).toEqual([[1], [2], [3], [4], [5], [6, 7]]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("idle() resolves once nothing is queued or in flight", async () => {
    const h = harness();
    h.submit("a", 1);
    let idle = false;
    void h.committer.idle().then(() => {
      idle = true;
    });
    await h.tick();
    expect(idle).toBe(false);
    h.ends[0]([undefined]);
    await h.tick();
    expect(idle).toBe(true);
    await h.committer.idle();
  });
});
