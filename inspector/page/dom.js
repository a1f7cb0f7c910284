// Small DOM and formatting helpers shared by the page's modules.

/** Creates an element: h("div", { class: "x", "data-id": 1 }, child, "text"). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") el.textContent = String(value);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === undefined || child === null) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Sets an attribute only when it changes (cheap to call every frame). */
export function setAttr(el, name, value) {
  const text = String(value);
  if (el.getAttribute(name) !== text) el.setAttribute(name, text);
}

/** Sets text only when it changes. */
export function setText(el, text) {
  const value = String(text);
  if (el.textContent !== value) el.textContent = value;
}

/** 1234 → "1.23s", 65_000 → "1m05s", 12 → "12ms". */
export function fmtMs(ms) {
  if (!Number.isFinite(ms)) return "–";
  const abs = Math.abs(ms);
  const sign = ms < 0 ? "-" : "";
  if (abs < 1000) return `${sign}${Math.round(abs)}ms`;
  if (abs < 60_000) return `${sign}${(abs / 1000).toFixed(abs < 10_000 ? 2 : 1)}s`;
  const m = Math.floor(abs / 60_000);
  const s = Math.floor((abs % 60_000) / 1000);
  return `${sign}${m}m${String(s).padStart(2, "0")}s`;
}

/** Relative time stamp with a fixed width for the event log: "+12.345s". */
export function fmtStamp(ms) {
  if (!Number.isFinite(ms)) return "";
  return `+${(ms / 1000).toFixed(3)}s`;
}

/** "call_AbCdEfGhIjKl" → "call_AbCd…"; ids stay recognisable but short. */
export function shortId(id, keep = 8) {
  if (typeof id !== "string") return "";
  const cut = id.indexOf("_") + 1 + keep;
  return id.length > cut + 1 ? `${id.slice(0, cut)}…` : id;
}

/** Compact number: 12345 → "12.3k". */
export function fmtCount(n) {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}
