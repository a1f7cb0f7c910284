import { createAnthropic } from "@ai-sdk/anthropic";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";
import { aiSdkModel, type Model, openaiModel } from "../index.ts";
import { CliError, EXIT } from "./errors.ts";

/** The providers `--provider` names (README "Providers" has the table). */
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
 * The model of `provider` from the environment (`KEEL_MODEL`, the provider's key and base URL
 * variables). Throws a config error naming the variable to set when the key is missing.
 * `openai-compatible` is Chat Completions through `openaiModel` (any compatible server; no key
 * needed with a base URL); `openai` is the Responses API, `anthropic` the Messages API and
 * `google` the Gemini API, each through its AI SDK provider package and `aiSdkModel`.
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
  switch (provider) {
    case "openai-compatible":
      return openaiModel({ model, ...(apiKey ? { apiKey } : {}), ...(baseURL ? { baseURL } : {}) });
    case "openai":
      // store: false keeps the API stateless: reasoning comes back as encrypted items Keel logs
      // and sends back, instead of references to what OpenAI stored.
      return aiSdkModel(createOpenAI({ apiKey, baseURL }).responses(model), {
        providerOptions: { openai: { store: false, include: ["reasoning.encrypted_content"] } },
      });
    case "anthropic":
      return aiSdkModel(createAnthropic({ apiKey, baseURL })(model));
    case "google":
      return aiSdkModel(createGoogleGenerativeAI({ apiKey, baseURL })(model));
  }
}
