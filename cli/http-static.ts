/**
 * The files of one folder over HTTP, for `keel serve --http --static <dir>` (a chat page such as
 * examples/web): GET and HEAD only, no listing, nothing outside the folder (a path that
 * resolves elsewhere, a dot file or a symlink out is 404), `index.html` for `/`. The page is
 * not secret: the API it calls needs the token, which the page reads from its URL's fragment.
 */
import { realpathSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { CliError, EXIT } from "./errors.ts";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
};

/** A listener serving the files of `dir` (see the file's comment). Throws a `CliError` if `dir` is not a folder. */
export function staticFiles(dir: string): (req: IncomingMessage, res: ServerResponse) => void {
  let root: string;
  try {
    root = realpathSync(dir);
    if (!statSync(root).isDirectory()) throw new Error("not a folder");
  } catch (error) {
    throw new CliError(
      `--static ${dir}: ${(error as Error).message}; give the folder of the page to serve`,
      EXIT.config,
    );
  }
  const notFound = (res: ServerResponse) => {
    res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
    res.end("404 not found\n");
  };
  return (req, res) => {
    if (req.method !== "GET" && req.method !== "HEAD") return notFound(res);
    let rel: string;
    try {
      rel = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
    } catch {
      return notFound(res);
    }
    if (rel.endsWith("/")) rel += "index.html";
    if (rel.split("/").some((part) => part.startsWith("."))) return notFound(res);
    const file = path.join(root, rel);
    let real: string;
    try {
      real = realpathSync(file);
    } catch {
      return notFound(res);
    }
    if (!real.startsWith(root + path.sep)) return notFound(res);
    void readFile(real).then(
      (body) => {
        res.writeHead(200, {
          "content-type": TYPES[path.extname(real)] ?? "application/octet-stream",
          "cache-control": "no-store",
          "x-content-type-options": "nosniff",
          "referrer-policy": "no-referrer",
        });
        res.end(req.method === "HEAD" ? undefined : body);
      },
      () => notFound(res),
    );
  };
}
