// The docs a newcomer reads: a README short enough for the first hour, guide pages under docs/,
// and links between them that lead somewhere (a file that exists, a heading it has).
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");

function markdownFiles(): string[] {
  const files = [
    "README.md",
    ...readdirSync(join(ROOT, "bench"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => `bench/${f}`),
  ];
  for (const f of readdirSync(join(ROOT, "docs"))) if (f.endsWith(".md")) files.push(`docs/${f}`);
  return files;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const h = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (h) anchors.add(slug(h[1]));
  }
  return anchors;
}

/** The relative links of a markdown text, outside code blocks: `[text](target)`. */
function linksOf(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  let fenced = false;
  markdown.split("\n").forEach((line, i) => {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced) return;
    const text = line.replace(/`[^`]*`/g, "");
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (!/^[a-z]+:/.test(m[1])) links.push({ line: i + 1, target: m[1] });
    }
  });
  return links;
}

describe("the docs", () => {
  it("the README fits a newcomer's first hour: at most 300 lines", () => {
    const lines = readFileSync(join(ROOT, "README.md"), "utf8").split("\n").length - 1;
    expect(lines).toBeLessThanOrEqual(300);
  });

  it("every guide page the README's map names exists", () => {
    for (const page of [
      "embedding",
      "tools",
      "permissions",
      "providers",
      "long-sessions",
      "stores",
      "many-processes",
      "acceptance",
      "protocol",
      "inspector",
      "testing-your-tools",
      "cli",
      "architecture",
      "testing",
      "troubleshooting",
      "glossary",
    ]) {
      expect(existsSync(join(ROOT, "docs", `${page}.md`)), page).toBe(true);
    }
  });

  it("every relative link of the README, docs/ and bench/ leads to a file that exists and a heading it has", () => {
    const broken: string[] = [];
    for (const file of markdownFiles()) {
      const text = readFileSync(join(ROOT, file), "utf8");
      for (const { line, target } of linksOf(text)) {
        const [path, anchor] = target.split("#");
        const to = path ? join(ROOT, dirname(file), decodeURIComponent(path)) : join(ROOT, file);
        if (!existsSync(to)) {
          broken.push(`${file}:${line}: ${target} (no file ${relative(ROOT, to)})`);
        } else if (
          anchor &&
          to.endsWith(".md") &&
          !anchorsOf(readFileSync(to, "utf8")).has(anchor)
        ) {
          broken.push(
            `${file}:${line}: ${target} (no heading #${anchor} in ${relative(ROOT, to)})`,
          );
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("no page cites the design document, which is not in the repository", () => {
    const cites = markdownFiles().flatMap((file) =>
      readFileSync(join(ROOT, file), "utf8")
        .split("\n")
        .flatMap((line, i) => (/DESIGN(\.md)? ?§/.test(line) ? [`${file}:${i + 1}`] : [])),
    );
    expect(cites).toEqual([]);
  });

  it("no code comment cites the design document or a bare invariant number: each cites a file of the repository", () => {
    const listed = execFileSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" })
      .split("\0")
      .filter((f) => /\.(ts|js|mjs)$/.test(f) && existsSync(join(ROOT, f)));
    const bare: string[] = [];
    for (const file of listed) {
      if (file.endsWith("docs.unit.test.ts")) continue;
      const text = readFileSync(join(ROOT, file), "utf8");
      // An invariant is cited by its number in a file that names where the list is.
      const cites = /docs\/architecture\.md/.test(text);
      text.split("\n").forEach((line, i) => {
        const design = /DESIGN ?(§|'s)/.test(line);
        const invariant = /\b[Ii]nvariants? §?\d/.test(line) && !cites;
        if (design || invariant) bare.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(bare).toEqual([]);
  });
});
