import { jsonProblem } from "../../contracts/json-limits.ts";
import type { JsonValue } from "../../contracts/messages.ts";
import type { ToolImage, ToolResult } from "../../contracts/tool-result.ts";
import { describeJsonType } from "../prepare/describe-json-type.ts";
import { utf8Length } from "../utf8.ts";

/** Bytes of images one result keeps (base64 text); the rest are named in the text only. */
export const MAX_KEPT_IMAGE_BYTES = 4 * 1024 * 1024;
/** Bytes of `structuredContent` (as JSON) one result keeps beside its text. */
export const MAX_KEPT_STRUCTURED_BYTES = 1024 * 1024;

/**
 * A `tools/call` result as a Keel result. The model reads text: text blocks joined by newlines;
 * `structuredContent` as JSON when there is no text (MCP asks servers to send both); each image,
 * audio clip and resource named in a line (`[image image/png, 1 234 bytes]`); an embedded text
 * resource's text. `structuredContent` and images are kept as `structured` and `images` (within
 * `MAX_KEPT_*_BYTES`). `isError: true` is a failure with the text as its message. Anything that
 * is not a result is a failure saying what arrived. The output budget applies after this. Pure.
 */
export function fromMcpResult(result: unknown, tool: string): ToolResult {
  if (typeof result !== "object" || result === null) {
    return failure(`the MCP server's answer to ${tool} is not a tool result`);
  }
  const r = result as { content?: unknown; structuredContent?: unknown; isError?: unknown };
  if (r.content !== undefined && !Array.isArray(r.content)) {
    return failure(
      `the MCP server's answer to ${tool} is not a tool result: its "content" is ${describeJsonType(r.content)}, not an array of content blocks`,
    );
  }
  const blocks = Array.isArray(r.content) ? r.content : [];
  const lines: string[] = [];
  const images: ToolImage[] = [];
  let imageBytes = 0;
  for (const block of blocks) {
    if (typeof block !== "object" || block === null) continue;
    const b = block as Record<string, unknown>;
    switch (b.type) {
      case "text":
        if (typeof b.text === "string") lines.push(b.text);
        break;
      case "image": {
        const data = typeof b.data === "string" ? b.data : "";
        const mediaType = typeof b.mimeType === "string" ? b.mimeType : "image";
        const bytes = Math.floor((data.length * 3) / 4);
        const keep = imageBytes + data.length <= MAX_KEPT_IMAGE_BYTES;
        if (keep) {
          images.push({ mediaType, base64: data });
          imageBytes += data.length;
        }
        lines.push(
          `[image ${mediaType}, ${bytes} bytes${keep ? "" : ", not kept: over the size limit"}; tool results reach you as text, so you cannot see it]`,
        );
        break;
      }
      case "audio":
        lines.push(`[audio ${String(b.mimeType ?? "")}: tool results reach you as text]`);
        break;
      case "resource_link":
        lines.push(`[resource ${String(b.name ?? "")} ${String(b.uri ?? "")}]`);
        break;
      case "resource": {
        const res = (b.resource ?? {}) as Record<string, unknown>;
        if (typeof res.text === "string") lines.push(res.text);
        else
          lines.push(`[resource ${String(res.uri ?? "")} (${String(res.mimeType ?? "binary")})]`);
        break;
      }
      default:
        lines.push(`[content of type ${JSON.stringify(String(b.type)).slice(0, 60)} not shown]`);
    }
  }
  let structured: JsonValue | undefined;
  let text = lines.join("\n");
  if (r.structuredContent !== undefined) {
    const json = safeJson(r.structuredContent);
    const storable =
      json !== undefined && jsonProblem(r.structuredContent, "structured") === undefined;
    if (storable && utf8Length(json) <= MAX_KEPT_STRUCTURED_BYTES) {
      structured = r.structuredContent as JsonValue;
    }
    if (text === "" && json !== undefined) text = json;
  }
  if (r.isError === true) {
    return failure(text === "" ? `${tool} reported an error without a message` : text);
  }
  return {
    ok: true,
    content: text,
    ...(structured !== undefined && { structured }),
    ...(images.length > 0 && { images }),
  };
}

function failure(message: string): ToolResult {
  return { ok: false, code: "EXECUTION_FAILED", message, retryable: false };
}

function safeJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}
