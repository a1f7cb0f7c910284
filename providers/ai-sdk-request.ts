// The AI SDK adapter's request checks and rewrites (for `aiSdkModel` in ai-sdk-model.ts): whether
// an image URL may go to the model as a URL (its `supportedUrls`, read once) and the prefill rules
// of `continueFromPartial` (which providers take one, and the trailing whitespace a prefill must
// not send). The translation of messages and tools into the V3 prompt stays in ai-sdk-model.ts,
// where `toV3Prompt` is exported; nothing here does I/O.
import type {
  LanguageModelV3,
  LanguageModelV3Prompt,
  SharedV3ProviderOptions,
} from "@ai-sdk/provider";
import { ModelError } from "../contracts/model.ts";

/**
 * Anthropic's Messages API continues a prefill, except with extended thinking on. Matched by the
 * package's `provider` name (`anthropic.messages`, `vertex.anthropic.messages`).
 */
export function takesPrefill(
  provider: string,
  providerOptions: SharedV3ProviderOptions | undefined,
) {
  const thinking = (providerOptions?.anthropic?.thinking as { type?: unknown } | undefined)?.type;
  return (
    provider.split(".").includes("anthropic") && thinking !== "enabled" && thinking !== "adaptive"
  );
}

/**
 * A prefill (the prompt's last message is the assistant's text) without its trailing whitespace,
 * in place; the message goes when nothing is left. Returns whether whitespace was removed.
 */
export function trimPrefill(prompt: LanguageModelV3Prompt): boolean {
  const last = prompt.at(-1);
  if (last?.role !== "assistant" || !last.content.every((p) => p.type === "text")) return false;
  const part = last.content.at(-1);
  if (part?.type !== "text" || part.text.trimEnd() === part.text) return false;
  part.text = part.text.trimEnd();
  if (part.text === "") last.content.pop();
  if (last.content.length === 0) prompt.pop();
  return true;
}

/**
 * The model's `supportedUrls`, read once: `refusal` is `Model.input.checkImageUrl` (undefined
 * while a promised map is pending: `guard` then checks before the request); `guard` throws a
 * not-retried `ModelError` for a prompt with an image URL the model does not take.
 */
export function urlSupport(languageModel: LanguageModelV3) {
  let map: Record<string, RegExp[]> | undefined;
  let failed: string | undefined;
  let pending: Promise<void> | undefined;
  const fail = (err: unknown) => {
    failed = err instanceof Error ? err.message : String(err);
  };
  try {
    const value = languageModel.supportedUrls;
    if (typeof (value as PromiseLike<unknown> | undefined)?.then === "function") {
      pending = Promise.resolve(value).then((m) => {
        map = m ?? {};
      }, fail);
    } else map = (value as Record<string, RegExp[]> | undefined) ?? {};
  } catch (err) {
    fail(err);
  }
  const who = languageModel.provider;

  const refusal = (url: string, mediaType: string | undefined): string | undefined => {
    if (failed !== undefined) return `${who}'s supported URLs could not be read (${failed})`;
    if (map === undefined || /^data:/i.test(url)) return undefined;
    const type = mediaType ?? "image/*";
    const patterns = urlPatterns(map, type);
    if (patterns.some((r) => r.test(url))) return undefined;
    const why =
      patterns.length === 0
        ? `${who} takes no ${type} URL`
        : `${who} takes ${type} URLs matching ${patterns.join(" or ")} only`;
    if (mediaType !== undefined) return why;
    const known = map;
    const typed = IMAGE_TYPES.filter((t) => urlPatterns(known, t).some((r) => r.test(url)));
    return typed.length === 0
      ? why
      : `${why} (with its mediaType given, ${typed.join(" or ")}, it would take this one)`;
  };

  const guard = async (prompt: LanguageModelV3Prompt): Promise<void> => {
    if (pending) await pending;
    for (const m of prompt) {
      if (m.role !== "user") continue;
      for (const p of m.content) {
        if (p.type !== "file" || !(p.data instanceof URL)) continue;
        const url = p.data.href;
        const why = refusal(url, p.mediaType === "image/*" ? undefined : p.mediaType);
        if (why === undefined) continue;
        throw new ModelError(
          `the history holds an image URL the model cannot take (${JSON.stringify(url.slice(0, 120))}: ${why}); nothing was sent. Send the image's bytes instead, or use a model that takes the URL`,
          { kind: "http", code: "unsupported_image_url", type: "invalid_request_error" },
        );
      }
    }
  };
  return { refusal, guard };
}

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;

/**
 * The patterns of a `supportedUrls` map (keys are media types, `type/*` or `*`) that apply to
 * `mediaType`. This is a pure function.
 */
function urlPatterns(map: Record<string, RegExp[]>, mediaType: string): RegExp[] {
  const type = mediaType.toLowerCase();
  return Object.entries(map).flatMap(([key, patterns]) => {
    const k = key.toLowerCase();
    const applies =
      k === "*" || k === "*/*" || (k.endsWith("/*") ? type.startsWith(k.slice(0, -1)) : k === type);
    return applies ? patterns : [];
  });
}
