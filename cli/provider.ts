import { createRequire } from "node:module";
import type * as Anthropic from "@ai-sdk/anthropic";
import type * as Google from "@ai-sdk/google";
import type * as OpenAIProvider from "@ai-sdk/openai";
import { loadPeer } from "../contracts/optional-peer.ts";
import {
  aiSdkModel,
  knownModelLimits,
  type Model,
  openaiModel,
  openaiTokenCounter,
} from "../index.ts";
import { CliError, EXIT } from "./errors.ts";

const require = createRequire(import.meta.url);

/**
 * The AI SDK provider package of `--provider <name>`: optional peers, loaded when chosen, or a
 * MissingPeerError saying what to install (main.ts turns it into exit code 3).
 */
const sdk = {
  anthropic: () => loadPeer<typeof Anthropic>(require, "@ai-sdk/anthropic", "--provider anthropic"),
  google: () => loadPeer<typeof Google>(require, "@ai-sdk/google", "--provider google"),
  openai: () => loadPeer<typeof OpenAIProvider>(require, "@ai-sdk/openai", "--provider openai"),
};

/** The providers `--provider` names (docs/providers.md has the table). */
export const PROVIDERS = ["openai-compatible", "openai", "anthropic", "google"] as const;
export type ProviderName = (typeof PROVIDERS)[number];

/** What each provider reads from the environment, and its default model. */
export const PROVIDER_ENV: Readonly<
  Record<ProviderName, { key: string; baseURL: string; model: string; keyOptional?: boolean }>
> = {
  "openai-compatible": {
    key: "OPENAI_API_KEY",
    baseURL: "OPENAI_BASE_URL",
    model: "gpt-4.1-mini",
    keyOptional: true,
  },
  openai: { key: "OPENAI_API_KEY", baseURL: "OPENAI_BASE_URL", model: "gpt-4.1-mini" },
  anthropic: {
    key: "ANTHROPIC_API_KEY",
    baseURL: "ANTHROPIC_BASE_URL",
    model: "claude-sonnet-4-5",
  },
  google: {
    key: "GOOGLE_GENERATIVE_AI_API_KEY",
    baseURL: "GOOGLE_GENERATIVE_AI_BASE_URL",
    model: "gemini-2.5-flash",
  },
};

/** `--provider` / `KEEL_PROVIDER` checked: a usage error listing the choices otherwise. */
export function providerName(value: string | undefined): ProviderName {
  const name = value ?? "openai-compatible";
  if ((PROVIDERS as readonly string[]).includes(name)) return name as ProviderName;
  throw new CliError(
    `unknown provider "${name}": use --provider ${PROVIDERS.join(" | ")} (or KEEL_PROVIDER)`,
    EXIT.usage,
  );
}

/**
 * Context windows of the AI SDK providers' model families, by name prefix, for the context
 * budget when `KEEL_CONTEXT_WINDOW` is not set (OpenAI's names: `knownModelLimits`). Every
 * current Claude model takes 200 000 tokens; Gemini 2.x takes 1 048 576.
 */
const FAMILY_WINDOWS: readonly (readonly [prefix: string, window: number])[] = [
  ["claude-", 200_000],
  ["gemini-", 1_048_576],
];

/** `KEEL_CONTEXT_WINDOW` checked: a config error when it is not a positive integer. */
function windowFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const window = env.KEEL_CONTEXT_WINDOW;
  if (!window) return undefined;
  const tokens = Number(window);
  if (!(Number.isInteger(tokens) && tokens > 0)) {
    throw new CliError(
      `KEEL_CONTEXT_WINDOW must be a positive integer (tokens), got ${JSON.stringify(window)}`,
      EXIT.config,
    );
  }
  return tokens;
}

/** `KEEL_MAX_INPUT_TOKENS`: the model's input limit, when below its window less the reserve. */
function inputLimitFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const limit = env.KEEL_MAX_INPUT_TOKENS;
  if (!limit) return undefined;
  const tokens = Number(limit);
  if (!(Number.isInteger(tokens) && tokens > 0)) {
    throw new CliError(
      `KEEL_MAX_INPUT_TOKENS must be a positive integer (tokens), got ${JSON.stringify(limit)}`,
      EXIT.config,
    );
  }
  return tokens;
}

function unknownWindow(model: string): CliError {
  return new CliError(
    `the context window of model ${model} is not known: export KEEL_CONTEXT_WINDOW=<tokens> (e.g. 32768)`,
    EXIT.config,
  );
}

/**
 * The model of `provider` from the environment (`KEEL_MODEL`, the provider's key and base URL
 * variables, `KEEL_CONTEXT_WINDOW`). Throws a config error naming the variable to set when the
 * key is missing, or when the model's context window is neither known nor given.
 * `openai-compatible` is Chat Completions through `openaiModel` (any compatible server; no key
 * needed with a base URL); `openai` is the Responses API, `anthropic` the Messages API and
 * `google` the Gemini API, each through its AI SDK provider package and `aiSdkModel` (OpenAI's
 * models count with their tokenizer, the others with the chars estimate).
 */
export function modelFor(provider: ProviderName, env: NodeJS.ProcessEnv = process.env): Model {
  const vars = PROVIDER_ENV[provider];
  const apiKey = env[vars.key] || undefined;
  const baseURL = env[vars.baseURL] || undefined;
  const model = env.KEEL_MODEL || vars.model;
  if (!apiKey && !(vars.keyOptional && baseURL)) {
    const local = vars.keyOptional
      ? ` (or ${vars.baseURL}=http://127.0.0.1:8080/v1 for a local server)`
      : "";
    throw new CliError(
      `${vars.key} is not set: export ${vars.key}=…${local} to use --provider ${provider}; \`keel demo\` needs no key`,
      EXIT.config,
    );
  }
  const given = windowFromEnv(env);
  const input = inputLimitFromEnv(env);
  const maxIn = input === undefined ? {} : { maxInputTokens: input };
  switch (provider) {
    case "openai-compatible":
      try {
        // The library reads OPENAI_API_KEY and OPENAI_BASE_URL from `env` by its own rule
        // (openaiEnvironment): the command and an embedder's openaiModel() agree.
        return openaiModel({ model, env, ...(given ? { contextWindow: given } : {}), ...maxIn });
      } catch (err) {
        // An unknown model's window: say which variable sets it.
        if (err instanceof TypeError && /context window/.test(err.message)) {
          throw unknownWindow(model);
        }
        throw err;
      }
    case "openai": {
      const contextWindow = given ?? knownModelLimits(model)?.contextWindow;
      if (contextWindow === undefined) throw unknownWindow(model);
      const countTokens = openaiTokenCounter(model);
      const known = knownModelLimits(model)?.maxInputTokens;
      const maxInputTokens = input ?? known;
      // store: false keeps the API stateless: reasoning comes back as encrypted items Keel logs
      // and sends back, instead of references to what OpenAI stored.
      return aiSdkModel(sdk.openai().createOpenAI({ apiKey, baseURL }).responses(model), {
        contextWindow,
        ...(maxInputTokens === undefined ? {} : { maxInputTokens }),
        ...(countTokens ? { countTokens } : {}),
        providerOptions: { openai: { store: false, include: ["reasoning.encrypted_content"] } },
      });
    }
    case "anthropic":
    case "google": {
      const contextWindow =
        given ?? FAMILY_WINDOWS.find(([prefix]) => model.startsWith(prefix))?.[1];
      if (contextWindow === undefined) throw unknownWindow(model);
      const languageModel =
        provider === "anthropic"
          ? sdk.anthropic().createAnthropic({ apiKey, baseURL })(model)
          : sdk.google().createGoogleGenerativeAI({ apiKey, baseURL })(model);
      return aiSdkModel(languageModel, { contextWindow, ...maxIn });
    }
  }
}
