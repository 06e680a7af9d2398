// What the board page is built from: DOM building, the API, times, toasts and the
// one <dialog> that asks questions. No state of the board lives here.

export const $ = (sel, root) => (root || document).querySelector(sel);
export const el = (tag, attrs, ...kids) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid !== null && kid !== undefined && kid !== false) node.append(kid instanceof Node ? kid : String(kid));
  }
  return node;
};

// The characters that reorder text around them (the bidi marks, embeddings, overrides
// and isolates). In an agent's text -- a diff's line, a task's title -- they would show
// a person something else than it holds ("Trojan Source"), so each is shown as a
// marker naming it and obeys nothing. The parts go into el() as its children.
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function bidiMarked(raw) {
  const text = String(raw ?? "");
  const parts = [];
  let at = 0;
  for (const m of text.matchAll(BIDI)) {
    const code = "U+" + m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    parts.push(text.slice(at, m.index), el("span", { class: "bidi", title: `invisible ${code} (reorders text)` }, `[${code}]`));
    at = m.index + 1;
  }
  parts.push(text.slice(at));
  return parts;
}

// --- the API -------------------------------------------------------------------

export function csrf() {
  const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

export async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrf(), Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    const error = new Error((data && data.detail) || response.statusText);
    error.body = data;
    throw error;
  }
  return data;
}

// --- time ----------------------------------------------------------------------

export function span(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`.replace(/ 00s$/, "");
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`.replace(/ 0m$/, "");
  return `${Math.floor(s / 86400)}d`;
}

export function ago(iso) {
  const s = (Date.now() - Date.parse(iso)) / 1000;
  if (!isFinite(s)) return "";
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  if (s < 86400 * 30) return `${Math.round(s / 86400)}d ago`;
  return new Date(iso).toLocaleDateString();
}

// Elements that show a time say which kind in data-rel; one timer keeps them honest.
export function timeText(node) {
  const at = node.dataset.at;
  switch (node.dataset.rel) {
    case "ago": return ago(at);
    case "beat": return `beat ${span((Date.now() - Date.parse(at)) / 1000)} ago`;
    case "lease": {
      const left = (Date.parse(at) - Date.now()) / 1000;
      node.classList.toggle("bad", left <= 0);
      return left > 0 ? `lease ${span(left)} left` : `lease lapsed ${span(-left)} ago`;
    }
    default: return node.textContent;
  }
}
export function timed(tag, cls, rel, at, title) {
  const node = el(tag, { class: cls, "data-rel": rel, "data-at": at, title: title || new Date(at).toLocaleString() });
  if (tag === "time") node.setAttribute("datetime", at);
  node.textContent = timeText(node);
  return node;
}
// One timer keeps every shown time honest.
export function startClock() {
  setInterval(() => {
    for (const node of document.querySelectorAll("[data-rel]")) node.textContent = timeText(node);
  }, 5000);
}

export function initials(name) {
  const parts = String(name).split(/[^A-Za-z0-9]+/).filter(Boolean);
  return ((parts[0] || "?")[0] + (parts[1] ? parts[1][0] : (parts[0] || "").slice(1, 2))).toUpperCase();
}

export function money(cents) {
  return cents >= 100 ? `$${(cents / 100).toFixed(2)}` : `${cents}¢`;
}
export function tokens(n) {
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n);
}

// --- toasts ------------------------------------------------------------------------

export function toast(text, kind) {
  const node = el("div", { class: "toast", "data-kind": kind || "", role: kind === "bad" ? "alert" : "status" },
    el("p", {}, bidiMarked(text)), el("button", { type: "button", "aria-label": "Dismiss", onclick: () => node.remove() }, "×"));
  $("#toasts").append(node);
  while ($("#toasts").children.length > 4) $("#toasts").firstChild.remove();
  setTimeout(() => node.remove(), kind === "bad" ? 9000 : 5000);
}

// --- dialogs (one <dialog>, filled per question) ------------------------------------

export function ask({ title, body, ok, okClass, validate }) {
  const dialog = $("#ask");
  $("#ask-title").replaceChildren(...bidiMarked(title));
  $("#ask-body").replaceChildren(...[body].flat(Infinity).filter((n) => n !== null && n !== undefined));
  $("#ask-error").textContent = "";
  const okButton = $("#ask-ok");
  okButton.textContent = ok || "OK";
  okButton.className = "btn " + (okClass || "primary");
  okButton.hidden = ok === null;
  return new Promise((resolve) => {
    const form = $("#ask-form");
    const onSubmit = (e) => {
      if (e.submitter && e.submitter.value === "cancel") return;
      e.preventDefault();
      const data = new FormData(form);
      const problem = validate ? validate(data) : null;
      if (problem) { $("#ask-error").textContent = problem; return; }
      done(data);
    };
    const onClose = () => done(null);
    function done(value) {
      form.removeEventListener("submit", onSubmit);
      dialog.removeEventListener("close", onClose);
      if (dialog.open) dialog.close();
      resolve(value);
    }
    form.addEventListener("submit", onSubmit);
    dialog.addEventListener("close", onClose);
    dialog.showModal();
    const first = $("#ask-body input, #ask-body select, #ask-body textarea, #ask-body button", dialog);
    if (first) first.focus();
  });
}
