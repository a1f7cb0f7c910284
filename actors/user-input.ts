import type { ImagePart, UserPart } from "../contracts/messages.ts";

/**
 * An image the user sends: by URL (`https:`/`http:`/`data:` string or a `URL`), or as bytes
 * (`Uint8Array`, e.g. a `Buffer` from `readFile`) with their media type; the media type of PNG,
 * JPEG, GIF and WebP bytes is recognised when omitted.
 */
export interface UserImageInput {
  type: "image";
  image: string | URL | Uint8Array;
  mediaType?: string;
}

/** What `prompt()`, `followUp()` and `steer()` take: text, or text and image parts in order. */
export type UserInput = string | readonly (UserPart | UserImageInput)[];

/** The user's input as log-ready data: `text` (the text parts joined) and, with an image, `parts`. */
export interface NormalizedInput {
  text: string;
  parts?: UserPart[];
}

/**
 * Checks and normalises `input` (images to {@link ImagePart}s: URLs kept, bytes as base64).
 * Throws a `TypeError` naming `where`, the part and the fix when something is malformed.
 * This is a pure function.
 */
export function normalizeUserInput(where: string, input: UserInput): NormalizedInput {
  if (typeof input === "string") {
    if (input.length === 0) throw new TypeError(`${where}: the input is empty; send some text`);
    return { text: input };
  }
  if (!Array.isArray(input) || input.length === 0) {
    throw new TypeError(
      `${where}: the input must be a non-empty string or a non-empty array of parts ({ type: "text", text } or { type: "image", image: url | bytes, mediaType? }), got ${JSON.stringify(input)}`,
    );
  }
  const parts: UserPart[] = input.map((part, i) => normalizePart(`${where}: part ${i}`, part));
  const text = parts.map((p) => (p.type === "text" ? p.text : "")).join("");
  if (parts.every((p) => p.type === "text")) {
    if (text.length === 0) throw new TypeError(`${where}: the input is empty; send some text`);
    return { text };
  }
  return { text, parts };
}

function normalizePart(where: string, part: UserPart | UserImageInput): UserPart {
  if (part?.type === "text") {
    if (typeof part.text !== "string")
      throw new TypeError(`${where}: a text part needs a string \`text\``);
    return { type: "text", text: part.text };
  }
  if (part?.type !== "image") {
    throw new TypeError(
      `${where}: unknown part type ${JSON.stringify((part as { type?: unknown })?.type)}; use "text" or "image"`,
    );
  }
  if ("url" in part && typeof part.url === "string")
    return checkUrl(where, part.url, part.mediaType);
  if ("base64" in part && typeof part.base64 === "string") {
    if (!part.mediaType) throw new TypeError(`${where}: base64 image bytes need a mediaType`);
    return { type: "image", base64: part.base64, mediaType: part.mediaType };
  }
  const image = (part as UserImageInput).image;
  if (image instanceof URL) return checkUrl(where, image.href, part.mediaType);
  if (typeof image === "string") return checkUrl(where, image, part.mediaType);
  if (image instanceof Uint8Array) {
    if (image.length === 0) throw new TypeError(`${where}: the image has no bytes`);
    const mediaType = part.mediaType ?? sniff(image);
    if (!mediaType) {
      throw new TypeError(
        `${where}: cannot tell the image's format from its bytes (not PNG, JPEG, GIF or WebP); pass mediaType, e.g. "image/png"`,
      );
    }
    return { type: "image", base64: Buffer.from(image).toString("base64"), mediaType };
  }
  throw new TypeError(
    `${where}: an image part needs \`image\`: a URL (string or URL) or bytes (Uint8Array)`,
  );
}

function checkUrl(where: string, url: string, mediaType: string | undefined): ImagePart {
  if (!/^(https?:|data:)/i.test(url)) {
    throw new TypeError(
      `${where}: image URL ${JSON.stringify(url.slice(0, 80))} is not http(s) or data:; pass the file's bytes instead (e.g. await readFile(path))`,
    );
  }
  return mediaType ? { type: "image", url, mediaType } : { type: "image", url };
}

function sniff(b: Uint8Array): string | undefined {
  const starts = (...bytes: number[]) => bytes.every((x, i) => b[i] === x);
  if (starts(0x89, 0x50, 0x4e, 0x47)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (starts(0x47, 0x49, 0x46, 0x38)) return "image/gif";
  if (starts(0x52, 0x49, 0x46, 0x46) && b[8] === 0x57 && b[9] === 0x45) return "image/webp";
  return undefined;
}
