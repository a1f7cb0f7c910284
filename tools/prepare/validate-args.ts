import type { z } from "zod";

export interface ArgIssue {
  /** `"path"`, `"edits[0].old_string"`, or `"(root)"`. */
  path: string;
  message: string;
}

export type ValidateResult = { ok: true; data: unknown } | { ok: false; issues: ArgIssue[] };

/**
 * Runs the tool's zod schema. A schema that throws (a faulty refinement, runaway recursion) is
 * reported as an issue at the root instead of propagating. Never throws.
 */
export function validateArgs(schema: z.ZodType, value: unknown): ValidateResult {
  try {
    const result = schema.safeParse(value);
    if (result.success) return { ok: true, data: result.data };
    return {
      ok: false,
      issues: result.error.issues.map((issue) => ({
        path: formatPath(issue.path),
        message: issue.message,
      })),
    };
  } catch (err) {
    return {
      ok: false,
      issues: [
        {
          path: "(root)",
          message: `validation threw: ${err instanceof Error ? err.message : String(err)}`,
        },
      ],
    };
  }
}

/** `["edits", 0, "old_string"]` → `edits[0].old_string`. */
export function formatPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return "(root)";
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out;
}
