import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * A `spill` function for `applyOutputBudget`: writes each oversized output to
 * `<root>/<dir>/<name>.txt` (default dir `.keel/spill`) and resolves to its workspace-relative
 * path, which `read_file` can page through.
 * Contract of `name`: returns a file-name-safe id, unique per call (e.g. the call id); it is
 * injected so tests stay deterministic.
 */
export function createSpill(options: { root: string; dir?: string; name: () => string }) {
  const dir = options.dir ?? ".keel/spill";
  return async (content: string): Promise<{ path: string }> => {
    const file = `${options.name().replace(/[^A-Za-z0-9_.-]/g, "_")}.txt`;
    const rel = path.posix.join(dir.split(path.sep).join("/"), file);
    const abs = path.join(options.root, rel);
    await mkdir(path.dirname(abs), { recursive: true });
    await writeFile(abs, content, { encoding: "utf8", flag: "wx" });
    return { path: rel };
  };
}
