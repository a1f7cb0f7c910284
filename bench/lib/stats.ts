/** Small numeric helpers shared by the children and the report. */

/** Median of a non-empty list (mean of the two middle values for even lengths). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("median of an empty list");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Projects the wall time of one run at `steps`, from the last two measured points: µs/step is
 * assumed to keep growing by the same factor per decade of steps as it did between them (never
 * shrinking), which is right for flat and for history-proportional runtimes alike.
 */
export function projectRunMs(
  measured: readonly { steps: number; usPerStep: number }[],
  steps: number,
): number {
  const last = measured.at(-1);
  if (last === undefined) return 0;
  const prev = measured.at(-2);
  let usPerStep = last.usPerStep;
  if (prev !== undefined && last.steps > prev.steps) {
    const perDecade =
      (last.usPerStep / prev.usPerStep) ** (1 / Math.log10(last.steps / prev.steps));
    usPerStep *= Math.max(1, perDecade) ** Math.log10(steps / last.steps);
  }
  return (usPerStep * steps) / 1000;
}

/** "12.3", "123", "1 234": µs with 3 significant digits, thin-grouped thousands. */
export function formatUs(us: number | null): string {
  if (us === null) return "—";
  if (us >= 1000) return Math.round(us).toLocaleString("en-US").replaceAll(",", " ");
  if (us >= 100) return us.toFixed(0);
  if (us >= 10) return us.toFixed(1);
  return us.toFixed(2);
}

/** Bytes as "512 B", "12.3 KB", "4.56 MB". */
export function formatBytes(bytes: number | null): string {
  if (bytes === null) return "—";
  if (bytes < 0) return "≈ 0 (GC noise)";
  const abs = Math.abs(bytes);
  if (abs < 1024) return `${Math.round(bytes)} B`;
  if (abs < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(2)} MB`;
}

/** A ratio as "1.00×", "12.3×", "123×". */
export function formatRatio(ratio: number | null): string {
  if (ratio === null || !Number.isFinite(ratio)) return "—";
  if (ratio >= 100) return `${ratio.toFixed(0)}×`;
  if (ratio >= 10) return `${ratio.toFixed(1)}×`;
  return `${ratio.toFixed(2)}×`;
}
