import type { ModelError } from "../../contracts/model.ts";

/**
 * What a failed model request was (docs/providers.md), as data: classification tables tested with
 * sample payloads, `classifyModelError`, and `parseRetryAfter`. Pure; the retry decision that
 * uses them is `retry-policy.ts`.
 */

export type ErrorCategory =
  | "context_overflow"
  | "quota"
  | "auth"
  | "bad_request"
  | "wire_mismatch"
  | "rate_limit"
  | "overloaded"
  | "server"
  | "network"
  | "timeout"
  | "aborted"
  | "unknown";

export interface ErrorClassification {
  retryable: boolean;
  category: ErrorCategory;
  /** What happened and what the caller can do about it. */
  reason: string;
}

/** Per category: retried or not, and the advice that starts every `reason`. */
export const CATEGORY_ADVICE: Readonly<
  Record<ErrorCategory, { retryable: boolean; advice: string }>
> = {
  context_overflow: {
    retryable: false,
    advice:
      "context overflow: the request exceeds the model's context window; compact or trim the history, or use a model with a larger window (not retried)",
  },
  quota: {
    retryable: false,
    advice:
      "quota or billing limit reached: waiting will not help; check the account's plan, credit and billing (not retried)",
  },
  auth: {
    retryable: false,
    advice:
      "authentication or permission failure: check apiKey / OPENAI_API_KEY and the key's access to this model (not retried)",
  },
  bad_request: {
    retryable: false,
    advice:
      "the provider rejected the request: check the model name, baseURL, messages and tool schemas (not retried)",
  },
  wire_mismatch: {
    retryable: false,
    advice:
      "the server does not speak this model's API: check the provider and the base URL (not retried)",
  },
  rate_limit: { retryable: true, advice: "rate limited by the provider" },
  overloaded: { retryable: true, advice: "the provider is overloaded" },
  server: { retryable: true, advice: "the provider returned a server error" },
  network: { retryable: true, advice: "the connection failed or the stream was cut" },
  timeout: { retryable: true, advice: "no data arrived in time" },
  aborted: { retryable: false, advice: "the request was cancelled by the caller (not retried)" },
  unknown: {
    retryable: false,
    advice: "unrecognised error: not retried; inspect the error and its cause",
  },
};

/** Context-overflow messages across providers. Matched before the status: never retried, even on 429/5xx. */
export const CONTEXT_OVERFLOW_PATTERNS: readonly RegExp[] = [
  /context[_ ]length[_ ]exceeded/i,
  /prompt is too long/i,
  /maximum context length/i,
  /exceeds the context window/i,
  /context window exceeds limit/i,
  /input is too long for requested model/i,
  /input token count.*exceeds the maximum/i,
  /maximum prompt length is \d+/i,
  /reduce the length of the messages/i,
  /exceeds the available context size/i,
  /greater than the context length/i,
  /exceeded model token limit/i,
  /too many tokens/i,
  /token limit exceeded/i,
];

/** Quota / billing messages and codes. Never retried, even with status 429. */
export const QUOTA_PATTERNS: readonly RegExp[] = [
  /insufficient[_ ]quota/i,
  /exceeded your current quota/i,
  /\bbilling/i,
  /credit balance is too low/i,
  /insufficient (credits|balance|funds)/i,
  /out of credits/i,
  /payment required/i,
];

/** HTTP statuses with a fixed meaning; other 5xx are `server`, other 4xx `bad_request`. */
export const STATUS_CATEGORIES: Readonly<Record<number, ErrorCategory>> = {
  400: "bad_request",
  401: "auth",
  402: "quota",
  403: "auth",
  404: "bad_request",
  408: "timeout",
  409: "server",
  413: "context_overflow",
  422: "bad_request",
  429: "rate_limit",
  503: "overloaded",
  529: "overloaded",
};

/** Provider error `code` / `type` values, for errors without a status (e.g. in-stream errors). */
export const CODE_CATEGORIES: Readonly<Record<string, ErrorCategory>> = {
  context_length_exceeded: "context_overflow",
  insufficient_quota: "quota",
  billing_hard_limit_reached: "quota",
  invalid_api_key: "auth",
  authentication_error: "auth",
  permission_error: "auth",
  invalid_request_error: "bad_request",
  not_found_error: "bad_request",
  rate_limit_exceeded: "rate_limit",
  rate_limit_error: "rate_limit",
  overloaded_error: "overloaded",
  server_error: "server",
  api_error: "server",
};

/** Transport kinds of `ModelError` (actors/model.ts) that decide the category on their own. */
export const KIND_CATEGORIES: Readonly<Record<string, ErrorCategory>> = {
  aborted: "aborted",
  network: "network",
  stream_cut: "network",
  first_chunk_timeout: "timeout",
  idle_timeout: "timeout",
  request_timeout: "timeout",
  protocol: "server",
  wire_mismatch: "wire_mismatch",
};

/** Message fallbacks for errors that carry neither a kind nor a status, checked in order. */
export const MESSAGE_CATEGORIES: readonly { pattern: RegExp; category: ErrorCategory }[] = [
  { pattern: /overloaded|at capacity|temporarily unavailable/i, category: "overloaded" },
  { pattern: /rate.?limit|too many requests/i, category: "rate_limit" },
  { pattern: /timed? ?out|ETIMEDOUT/i, category: "timeout" },
  {
    pattern:
      /ECONNRESET|ECONNREFUSED|EPIPE|EAI_AGAIN|UND_ERR_SOCKET|socket hang up|fetch failed|other side closed|network error|terminated|connection (error|reset|refused|closed)/i,
    category: "network",
  },
];

interface ErrorFields {
  kind?: string;
  status?: number;
  code?: string;
  type?: string;
  text: string;
  message: string;
}

function fieldsOf(err: unknown): ErrorFields {
  if (typeof err !== "object" || err === null) {
    const message = String(err);
    return { text: message, message };
  }
  const e = err as Record<string, unknown>;
  const body = (e.body ?? e.error) as Record<string, unknown> | undefined;
  const inner = (body?.error ?? body) as Record<string, unknown> | undefined;
  const str = (v: unknown) =>
    typeof v === "string" ? v : typeof v === "number" ? String(v) : undefined;
  const message = str(e.message) ?? "";
  const code = str(e.code) ?? str(inner?.code);
  const type = str(e.type) ?? str(inner?.type);
  const kind = str(e.kind) ?? (e.name === "AbortError" ? "aborted" : undefined);
  const text = [
    message,
    code,
    type,
    str(inner?.message),
    str((e.cause as { message?: unknown } | undefined)?.message),
  ]
    .filter(Boolean)
    .join(" | ");
  return {
    kind,
    status: typeof e.status === "number" ? e.status : undefined,
    code,
    type,
    text,
    message,
  };
}

function describe(category: ErrorCategory, f: ErrorFields): ErrorClassification {
  const { retryable, advice } = CATEGORY_ADVICE[category];
  const detail = [f.status && `HTTP ${f.status}`, f.kind && f.kind !== "http" && f.kind, f.code]
    .filter(Boolean)
    .join(", ");
  const msg = f.message.length > 200 ? `${f.message.slice(0, 200)}…` : f.message;
  return {
    retryable,
    category,
    reason: `${advice} (${detail || "no status"}: ${msg || "no message"})`,
  };
}

/**
 * Classifies a failed model request. Order: caller abort; context overflow and quota (by code
 * or message, whatever the status); transport kind; HTTP status; provider code/type; message.
 * This is a pure function.
 */
export function classifyModelError(err: ModelError | unknown): ErrorClassification {
  const f = fieldsOf(err);
  if (f.kind === "aborted") return describe("aborted", f);
  const codes = [f.code, f.type].filter((c): c is string => c !== undefined);
  const sticky = (["context_overflow", "quota"] as const).find(
    (cat) =>
      codes.some((c) => CODE_CATEGORIES[c] === cat) ||
      (cat === "context_overflow" ? CONTEXT_OVERFLOW_PATTERNS : QUOTA_PATTERNS).some((p) =>
        p.test(f.text),
      ),
  );
  if (sticky) return describe(sticky, f);
  const byKind = f.kind === undefined ? undefined : KIND_CATEGORIES[f.kind];
  if (byKind) return describe(byKind, f);
  if (f.status !== undefined) {
    const byStatus =
      STATUS_CATEGORIES[f.status] ??
      (f.status >= 500 ? "server" : f.status >= 400 ? "bad_request" : undefined);
    if (byStatus) return describe(byStatus, f);
  }
  const byCode = codes.map((c) => CODE_CATEGORIES[c]).find((c) => c !== undefined);
  if (byCode) return describe(byCode, f);
  const byText = MESSAGE_CATEGORIES.find((r) => r.pattern.test(f.text));
  return describe(byText?.category ?? "unknown", f);
}

export type RetryAfter =
  | { kind: "absent" }
  | { kind: "delay"; ms: number; source: "retry-after-ms" | "retry-after"; clamped: boolean };

/** Headers as a lowercased record (as `ModelError.headers`) or anything with `get`. */
export type HeaderSource = Record<string, string> | { get(name: string): string | null };

function header(headers: HeaderSource | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  if (typeof headers.get === "function") return headers.get(name) ?? undefined;
  const rec = headers as Record<string, string>;
  const key = Object.keys(rec).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : rec[key];
}

const NON_NEGATIVE_NUMBER = /^\s*\d+(\.\d+)?\s*$/;
/** The three RFC 9110 date forms all start with a day name and carry hh:mm:ss. */
const HTTP_DATE = /^[a-z]{3,9},?\s.*\b\d{2}:\d{2}:\d{2}\b/i;

/**
 * Reads `retry-after-ms` (milliseconds), then `Retry-After` (seconds, decimals allowed, or an
 * HTTP-date measured against `wallNowMs`, epoch ms). Invalid or negative → `absent`; a date in
 * the past or `0` → `delay` 0 ("already due", not absent). Clamped to `maxRetryAfterMs`.
 * This is a pure function.
 */
export function parseRetryAfter(
  headers: HeaderSource | undefined,
  wallNowMs: number,
  maxRetryAfterMs = 900_000,
): RetryAfter {
  const clamp = (ms: number, source: "retry-after-ms" | "retry-after"): RetryAfter => ({
    kind: "delay",
    ms: Math.min(Math.ceil(ms), maxRetryAfterMs),
    source,
    clamped: ms > maxRetryAfterMs,
  });
  const ms = header(headers, "retry-after-ms");
  if (ms !== undefined && NON_NEGATIVE_NUMBER.test(ms)) return clamp(Number(ms), "retry-after-ms");
  const value = header(headers, "retry-after")?.trim();
  if (!value) return { kind: "absent" };
  if (NON_NEGATIVE_NUMBER.test(value)) return clamp(Number(value) * 1000, "retry-after");
  if (!HTTP_DATE.test(value)) return { kind: "absent" };
  const at = Date.parse(value);
  if (Number.isNaN(at)) return { kind: "absent" };
  return clamp(Math.max(0, at - wallNowMs), "retry-after");
}
