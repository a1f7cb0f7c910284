/**
 * Compiles a glob to an anchored RegExp over `/`-separated relative paths:
 * `**` any number of path segments (`a/**\/b` matches `a/b`, `a/x/y/b`), `*` any characters
 * but `/`, `?` one character but `/`, `[abc]` / `[a-z]` / `[!a]` a character class,
 * `{a,b}` alternatives (nestable), `\x` a literal `x`. Dotfiles are matched like other names.
 * Unbalanced `[` or `}` are literals. Pure; linear in the pattern length.
 */
export function globToRegExp(pattern: string): RegExp {
  let out = "";
  let depth = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "*") {
      if (pattern[i + 1] === "*") {
        const atStart = i === 0 || pattern[i - 1] === "/";
        i++;
        while (pattern[i + 1] === "*") i++;
        if (atStart && pattern[i + 1] === "/") {
          out += "(?:[^/]*/)*";
          i++;
        } else out += ".*";
      } else out += "[^/]*";
    } else if (c === "?") out += "[^/]";
    else if (c === "[") {
      const end = pattern.indexOf("]", i + 2);
      if (end === -1) out += "\\[";
      else {
        let body = pattern.slice(i + 1, end);
        const negate = body[0] === "!" || body[0] === "^";
        if (negate) body = body.slice(1);
        out += `[${negate ? "^/" : ""}${body.replace(/[\\\]^]/g, "\\$&")}]`;
        i = end;
      }
    } else if (c === "{") {
      depth++;
      out += "(?:";
    } else if (c === "," && depth > 0) out += "|";
    else if (c === "}" && depth > 0) {
      depth--;
      out += ")";
    } else if (c === "\\" && i + 1 < pattern.length) {
      i++;
      out += escapeRe(pattern[i]);
    } else out += escapeRe(c);
  }
  out += ")".repeat(depth);
  return new RegExp(`^${out}$`);
}

function escapeRe(c: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(c) ? `\\${c}` : c;
}
