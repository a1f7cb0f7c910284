/**
 * A fenced code block of the README or of a page under docs/ marked as an example:
 * ```` ```ts example <name> ````.
 */
export interface ReadmeExample {
  name: string;
  /** The markdown file it is in, relative to the package (`README.md`, `docs/tools.md`). */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  code: string;
}

/** Every fenced block whose info string is `ts example <name>` (names unique, `[a-z0-9-]+`). */
export function readmeExamples(markdown: string, file = "README.md"): ReadmeExample[] {
  const examples: ReadmeExample[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*(.*)$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.indexOf("```", i + 1);
    if (end < 0) throw new Error(`${file}:${i + 1}: a code block is never closed`);
    const [lang, rest] = [open[1], open[2].trim().split(/\s+/).filter(Boolean)];
    if (rest[0] === "example") {
      const name = rest[1] ?? "";
      if (lang !== "ts" || !/^[a-z0-9-]+$/.test(name) || rest.length !== 2) {
        throw new Error(
          `${file}:${i + 1}: an example block opens with \`\`\`ts example <name> (name: a-z 0-9 -), got ${JSON.stringify(lines[i])}`,
        );
      }
      if (examples.some((e) => e.name === name)) {
        throw new Error(`${file}:${i + 1}: a second example named ${name}`);
      }
      examples.push({ name, file, line: i + 1, code: `${lines.slice(i + 1, end).join("\n")}\n` });
    }
    i = end;
  }
  return examples;
}

/**
 * The examples of several markdown files (`[file, text]` pairs), in order. An example name is
 * unique across all of them: each becomes `examples/<name>.ts` in the test project.
 */
export function examplesOf(files: [file: string, markdown: string][]): ReadmeExample[] {
  const all: ReadmeExample[] = [];
  for (const [file, markdown] of files) {
    for (const e of readmeExamples(markdown, file)) {
      const first = all.find((x) => x.name === e.name);
      if (first) {
        throw new Error(
          `${e.file}:${e.line}: a second example named ${e.name} (the first is at ${first.file}:${first.line})`,
        );
      }
      all.push(e);
    }
  }
  return all;
}

/** The info strings of every fenced block (for "every TypeScript block is an example"). */
export function fenceInfos(markdown: string): { line: number; info: string }[] {
  const infos: { line: number; info: string }[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i]);
    if (!open) continue;
    infos.push({ line: i + 1, info: open[1].trim() });
    const end = lines.indexOf("```", i + 1);
    i = end < 0 ? lines.length : end;
  }
  return infos;
}
