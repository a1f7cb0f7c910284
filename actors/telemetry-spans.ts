// The OpenTelemetry shapes Keel's telemetry uses (actors/telemetry.ts), and how content
// becomes a bounded attribute.
import type { TraceContext } from "../tools/types.ts";

/** The parts of an OpenTelemetry `Span` used here (the API's `Span` has them all). */
export interface SpanLike {
  setAttribute(key: string, value: AttributeValue): unknown;
  addEvent(name: string, attributes?: Record<string, AttributeValue>, time?: number): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(endTime?: number): void;
  isRecording(): boolean;
}

/** A span attribute's value, as the parts used here set them. */
export type AttributeValue = string | number | boolean | string[];

/** The parts of an OpenTelemetry `Tracer` used here. */
export interface TracerLike {
  startSpan(
    name: string,
    options?: { kind?: number; startTime?: number; attributes?: Record<string, AttributeValue> },
    context?: TraceContext,
  ): SpanLike;
}

/** The parts of `@opentelemetry/api` used here. */
export interface OtelApi {
  trace: {
    getTracer(name: string, version?: string): TracerLike;
    setSpan(context: TraceContext, span: SpanLike): TraceContext;
  };
  context: {
    active(): TraceContext;
    with<T>(context: TraceContext, fn: () => T): T;
  };
}

/**
 * Longest content attribute with capture on (characters): a 5 MB prompt is a 5 MB span
 * attribute otherwise, held by every exporter's queue. The rest is cut with a note.
 */
export const MAX_CONTENT_ATTRIBUTE_CHARS = 16 * 1024;
/** Longest name taken from the model (a tool's name on an unknown-tool call). */
export const MAX_NAME_CHARS = 128;

/** JSON of a value for an attribute, cut to the bound; never throws. */
export function json(value: unknown): string {
  try {
    return clip(JSON.stringify(value) ?? "null");
  } catch {
    return "[unserialisable]";
  }
}

/** `text` cut to `max` characters, with a note of how much was left out. */
export function clip(text: string, max = MAX_CONTENT_ATTRIBUTE_CHARS): string {
  if (typeof text !== "string") return String(text);
  return text.length <= max ? text : `${text.slice(0, max)}…[${text.length - max} more characters]`;
}
