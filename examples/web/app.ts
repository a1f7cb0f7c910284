// The example chat page (docs/web-apps.md): the AI SDK's useChat with its default transport,
// talking to `keel serve --http` unchanged. The token comes from the page's URL fragment
// (`#token=…`, printed by keel serve; a fragment is never sent to a server). The chat id (the
// Keel session) is `?chat=` or "web". On load the page reads the conversation, then resumes the
// turn that runs, if one does. Stop is two things: the stream stops being read, and the turn is
// interrupted by a request of its own (closing a connection never cancels a run).
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type UIMessage,
} from "ai";
import { createElement as h, type ReactNode, useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";

const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
const chatId = new URLSearchParams(location.search).get("chat") ?? "web";

type Part = UIMessage["parts"][number];
type ToolPart = Extract<Part, { type: "dynamic-tool" }>;

function App(): ReactNode {
  const [initial, setInitial] = useState<UIMessage[] | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    fetch(`/api/chat/${encodeURIComponent(chatId)}/messages`, { headers })
      .then(async (r) => (r.ok ? setInitial((await r.json()).messages) : setError(await r.text())))
      .catch((e: Error) => setError(e.message));
  }, []);
  if (error) return h("p", { "data-testid": "error" }, error);
  if (!initial) return h("p", null, "loading…");
  return h(Chat, { initial });
}

function Chat({ initial }: { initial: UIMessage[] }): ReactNode {
  const transport = useMemo(() => new DefaultChatTransport({ api: "/api/chat", headers }), []);
  const chat = useChat({
    id: chatId,
    messages: initial,
    resume: true,
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [text, setText] = useState("");
  const stop = async () => {
    await chat.stop();
    await fetch(`/api/sessions/${encodeURIComponent(chatId)}/interrupt`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ reason: "the user pressed stop" }),
    });
  };
  const busy = chat.status === "submitted" || chat.status === "streaming";
  return h(
    "div",
    null,
    h("p", { className: "note", "data-testid": "status" }, chat.status),
    ...chat.messages.map((m) =>
      h(
        "div",
        { key: m.id, className: `msg ${m.role}`, "data-role": m.role },
        ...m.parts.map((p, i) =>
          h(PartView, { key: i, part: p, approve: chat.addToolApprovalResponse }),
        ),
      ),
    ),
    h(
      "form",
      {
        onSubmit: (e: Event) => {
          e.preventDefault();
          if (!text.trim()) return;
          void chat.sendMessage({ text });
          setText("");
        },
      },
      h("input", {
        "data-testid": "prompt",
        value: text,
        placeholder: "Ask Keel…",
        onChange: (e: { target: { value: string } }) => setText(e.target.value),
      }),
      h("button", { type: "submit", "data-testid": "send", disabled: busy }, "Send"),
      h(
        "button",
        { type: "button", "data-testid": "stop", disabled: !busy, onClick: () => void stop() },
        "Stop",
      ),
    ),
  );
}

function PartView({
  part,
  approve,
}: {
  part: Part;
  approve: ReturnType<typeof useChat>["addToolApprovalResponse"];
}): ReactNode {
  if (part.type === "text") return h("p", { "data-testid": "text" }, part.text);
  if (part.type === "reasoning") return h("p", { className: "note" }, `thinking: ${part.text}`);
  if (part.type !== "dynamic-tool") return null;
  const tool = part as ToolPart;
  const label = `${tool.toolName} ${JSON.stringify(tool.input)}`;
  const body: ReactNode[] = [h("span", { key: "l" }, `${label} — ${tool.state}`)];
  if (tool.state === "approval-requested") {
    const id = tool.approval.id;
    body.push(
      h(
        "button",
        {
          key: "a",
          type: "button",
          "data-testid": "approve",
          onClick: () => void approve({ id, approved: true }),
        },
        "Approve",
      ),
      h(
        "button",
        {
          key: "d",
          type: "button",
          "data-testid": "deny",
          onClick: () => void approve({ id, approved: false, reason: "the user said no" }),
        },
        "Deny",
      ),
    );
  }
  if (tool.state === "output-available")
    body.push(h("pre", { key: "o", "data-testid": "output" }, String(tool.output)));
  if (tool.state === "output-error") body.push(h("pre", { key: "e" }, tool.errorText));
  return h("div", { className: "tool", "data-testid": "tool", "data-state": tool.state }, ...body);
}

createRoot(document.getElementById("root")!).render(h(App));
