import { notExecuted, type ToolFailure } from "../../contracts/tool-result.ts";

/** Tool calls of one model message that are prepared; the rest are refused unread. */
export const MAX_CALLS_PER_MESSAGE = 128;
/** Characters of arguments one message's calls are read for, together. */
export const MAX_MESSAGE_ARGUMENT_CHARS = 16 * 1024 * 1024;

/**
 * The bound on one message's calls (docs/architecture.md, invariant 16: no single input stalls
 * the event loop, and a message of 5 000 calls or of 15 MB of arguments is one input). The first
 * `MAX_CALLS_PER_MESSAGE` calls whose arguments fit in `MAX_MESSAGE_ARGUMENT_CHARS` together
 * are prepared as usual; each later call is refused before its arguments are parsed, with an
 * `INVALID_ARGS` result saying which limit and how to send the rest. Returns the refusal of
 * each call by index (`undefined`: prepare it). Linear in the number of calls. This is a pure
 * function.
 */
export function messageLimitRefusals(
  calls: readonly { argumentsText: string }[],
): (ToolFailure | undefined)[] {
  let chars = 0;
  let over: "calls" | "chars" | undefined;
  return calls.map((call, index) => {
    if (over === undefined && index >= MAX_CALLS_PER_MESSAGE) over = "calls";
    chars += call.argumentsText.length;
    if (over === undefined && chars > MAX_MESSAGE_ARGUMENT_CHARS) over = "chars";
    if (over === undefined) return undefined;
    const limit =
      over === "calls"
        ? `this message has ${calls.length} tool calls and at most ${MAX_CALLS_PER_MESSAGE} are read from one message`
        : `the arguments of this message's tool calls reach ${MAX_MESSAGE_ARGUMENT_CHARS} characters together, the most read from one message`;
    return notExecuted(
      "INVALID_ARGS",
      `${limit}; call ${index + 1} and the later ones were not read. Send them again in a later message, fewer at a time.`,
    );
  });
}
