// Discussion: comments on the open task in markdown, with @-mentions of the team's
// people and agents (never a machine token's service user: the server leaves them
// out of config.members).
import { $, el, api, timed } from "./kit.js";
import { markdown } from "./markdown.js";
import { teamAgents } from "./agents.js";
import { config, state } from "./page.js";

const enc = encodeURIComponent;

let mentionable = null;           // people and agents of the team, by name
// The names known so far (null until asked): the chat's markdown marks only these.
export const knownNames = () => mentionable;
export async function mentionNames() {
  if (mentionable === null) {
    mentionable = new Set([...(config.members || []), ...(await teamAgents()).map((a) => a.id)]);
  }
  return mentionable;
}

export async function loadComments(taskId) {
  const [comments, known] = await Promise.all([
    api("GET", `/api/board/tasks/${enc(taskId)}/comments`), mentionNames()]);
  const list = $("#comments");
  if (state.selected !== taskId || !list) return;
  list.replaceChildren(...comments.map((c) => el("li", { "data-comment-id": c.id },
    el("div", { class: "comment-head" }, el("strong", { title: c.author }, c.author_name || c.author), " ", timed("time", "muted", "ago", c.created_at)),
    markdown(c.body, known))));
}

function insertAt(field, text) {
  const at = field.selectionStart ?? field.value.length;
  const before = field.value.slice(0, at);
  const gap = before && !/\s$/.test(before) ? " " : "";
  field.value = before + gap + text + " " + field.value.slice(field.selectionEnd ?? at);
  field.focus();
}

export function commentForm(task) {
  const field = el("textarea", {
    name: "body", id: "comment-body", rows: "3", required: true, maxlength: "20000",
    placeholder: "Comment… **bold**, *italics*, `code`, [link](https://…), @name tells them",
    "aria-label": "Comment",
  });
  const chips = el("div", { class: "mention-chips", "aria-label": "Mention" });
  mentionNames().then((names) => chips.replaceChildren(...[...names].sort().map((n) =>
    el("button", { type: "button", class: "chip", onclick: () => insertAt(field, "@" + n) }, "@" + n))));
  const error = el("p", { class: "form-error", role: "alert" });
  const form = el("form", {
    class: "comment-form", id: "comment-form",
    onsubmit: async (e) => {
      e.preventDefault();
      const body = field.value.trim();
      if (!body) return;
      const button = form.querySelector("button[type=submit]");
      button.disabled = true;
      try {
        await api("POST", `/api/board/tasks/${enc(task.id)}/comments`, { body });
        field.value = "";
        error.textContent = "";
        await loadComments(task.id);
      } catch (err) { error.textContent = err.message; }
      finally { button.disabled = false; }
    },
  }, field, chips, error, el("button", { type: "submit", class: "btn primary", id: "comment-send" }, "Comment"));
  field.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
  });
  return form;
}
