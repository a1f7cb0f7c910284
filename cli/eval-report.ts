import type { EvalSummary } from "./eval-summary.ts";

/** A progress bar on stderr, drawn only when stderr is a terminal. */
export function progressBar(total: number) {
  const tty = process.stderr.isTTY === true;
  let done = 0;
  const draw = (label: string) => {
    if (!tty) return;
    const width = 24;
    const filled = Math.round((done / total) * width);
    process.stderr.write(
      `\r[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${done}/${total} ${label}`.padEnd(72),
    );
  };
  return {
    tick(label: string) {
      done++;
      draw(label);
    },
    start: () => draw(""),
    end() {
      if (tty) process.stderr.write(`\r${" ".repeat(72)}\r`);
    },
  };
}

const pct = (x: number) => `${(100 * x).toFixed(0)}%`;

/**
 * The table of one summary, or of two side by side: base and the other side, whose columns are
 * headed `(<label>)` ("off" for a mechanism switched off, "B" for another model or tool set).
 * Tool-call columns (precision, recall, argument validity) appear when a task declares the
 * calls it expects; "-" where there was nothing to measure.
 */
export function renderTable(
  base: EvalSummary,
  other?: { label: string; summary: EvalSummary },
): string {
  const withTools = base.tools !== undefined || other?.summary.tools !== undefined;
  const head = [
    "task",
    "accepted",
    "pass@k",
    "pass^k",
    "mean tokens",
    "mean steps",
    "mean ms",
    "done≠accepted",
    "recovery fails",
    ...(withTools ? ["tool precision", "tool recall", "args valid"] : []),
  ];
  const ratio = (x: number | null | undefined) => (x === null || x === undefined ? "-" : pct(x));
  const cells = (t: EvalSummary["tasks"][number] | EvalSummary, k: number) => {
    const tools = "id" in t ? t : t.tools;
    return [
      "accepted" in t ? `${t.accepted}/${k}` : "",
      "id" in t ? (t.passAtK ? "yes" : "no") : pct(t.passAtK as number),
      "id" in t ? (t.passHatK ? "yes" : "no") : pct(t.passHatK as number),
      Math.round(t.meanTokens).toString(),
      t.meanSteps.toFixed(1),
      Math.round(t.meanMs).toString(),
      String(t.completedNotAccepted),
      String(t.recoveryFailures),
      ...(withTools
        ? [ratio(tools?.toolPrecision), ratio(tools?.toolRecall), ratio(tools?.argumentValidity)]
        : []),
    ];
  };
  const rows: string[][] = [];
  const header = other
    ? ["task", ...head.slice(1).flatMap((h) => [h, `${h} (${other.label})`])]
    : head;
  const zip = (a: string[], b?: string[]) => (b ? a.flatMap((x, i) => [x, b[i]]) : a);
  for (const [i, t] of base.tasks.entries()) {
    rows.push([
      t.id,
      ...zip(cells(t, base.k), other ? cells(other.summary.tasks[i], base.k) : undefined),
    ]);
  }
  rows.push(["all", ...zip(cells(base, base.k), other ? cells(other.summary, base.k) : undefined)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}
