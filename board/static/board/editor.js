// Edit in place, in the task's detail. The editor remembers the revision it started
// from; the PATCH carries it (if_revision), so an edit that lost a race is refused and
// shows the newer values. The page is told what happened through ``done``: saved (the
// new body), cancelled (null), or a newer body that won the race (``lost``).
import { $, el, api } from "./kit.js";
import { routeBody, routeText, sameRoute, splitList } from "./state.js";
import { config, state } from "./page.js";

const team = config.team;
const enc = encodeURIComponent;

let editing = null;               // {id, revision} while the detail's editor is open
// The editor open on a task ({id, revision}), or null.
export const openEditor = () => editing;
export function closeEditor() { editing = null; }

export function editNote(now, lost) {
  const note = $("#edit-note");
  if (!note) return;
  const theirs = [`title “${now.title}”`, `priority ${now.priority}`,
    `labels ${(now.labels || []).join(", ") || "—"}`,
    `depends on ${(now.depends_on || []).join(", ") || "—"}`,
    `route ${routeText(now.route) || "any agent of the team"}`];
  note.hidden = false;
  note.dataset.kind = lost ? "bad" : "warn";
  note.replaceChildren(
    el("strong", {}, lost ? "Not saved: someone else changed this task first." : "This task changed while you edit."),
    ` It now reads (revision ${now.revision}): ${theirs.join("; ")}. `,
    lost ? "Save again to put yours over it, or cancel to keep theirs." : "");
  if (lost) editing.revision = now.revision;
}

// The team's registered repositories (GET /api/repositories?team=…), asked once.
let repositories = null;
// Fill a repository menu (the editor's, New task's) with the team's repositories.
export function fillRepositories(menu, current) {
  const fill = (list) => {
    const ids = list.map((r) => r.id);
    if (current && !ids.includes(current)) ids.push(current);
    menu.replaceChildren(el("option", { value: "" }, "— the agent's default —"),
      ...ids.map((id) => el("option", { value: id, selected: id === current }, id)));
    menu.dataset.ready = "true";   // until then a save leaves the repository alone
  };
  if (repositories) fill(repositories);
  else {
    api("GET", `/api/repositories?team=${enc(team)}`)
      .then((list) => { repositories = list; fill(list); })
      .catch(() => fill([]));
  }
}

function repositoryMenu(task) {
  const menu = el("select", { name: "repository", id: "edit-repository" },
    el("option", { value: "" }, "— the agent's default —"));
  fillRepositories(menu, task.repository || null);
  return menu;
}

// The route (GOVERNANCE §1) is one more field of the editor: who may take the task.
function routeFields(route) {
  const runtimes = config.runtimes || [];
  const known = route.runtime && !runtimes.includes(route.runtime) ? [route.runtime] : [];
  return el("fieldset", { class: "route" },
    el("legend", {}, "Route (who may take it; empty: any agent of the team)"),
    el("div", { class: "row" },
      el("label", {}, "Agent ", el("input", { name: "route_agent", id: "edit-route-agent", list: "agent-options", value: route.agent || "", placeholder: "any" })),
      el("label", {}, "Runtime ", el("select", { name: "route_runtime", id: "edit-route-runtime" },
        el("option", { value: "" }, "any"),
        ...[...runtimes, ...known].map((rt) => el("option", { value: rt, selected: rt === route.runtime }, rt)))),
      el("label", {}, "Agent labels ", el("input", { name: "route_labels", id: "edit-route-labels", value: (route.labels || []).join(", "), placeholder: "gpu, ssd" }))));
}

// A field's hint, in New task's words (templates/board/board.html): a line under the
// field that wraps, where a placeholder was cut off at the panel's width.
const hint = (name) => el("small", { class: "field-hint", id: `edit-hint-${name}` },
  ($(`#hint-${name}`) || {}).textContent || "");

export function editForm(task, done) {
  editing = { id: task.id, revision: task.revision };
  const field = (name, ...nodes) => el("label", {}, name, ...nodes);
  const form = el("form", { class: "edit-form", id: "edit-form" },
    el("p", { class: "edit-note", id: "edit-note", role: "alert", hidden: true }),
    field("Title", el("input", { name: "title", id: "edit-title", value: task.title, required: true, maxlength: "500" })),
    field("Description", el("textarea", { name: "description", id: "edit-description", rows: "4" }, task.description || "")),
    el("div", { class: "row" },
      field("Priority", el("input", { name: "priority", id: "edit-priority", type: "number", value: String(task.priority) })),
      field("Labels", el("input", { name: "labels", id: "edit-labels", value: (task.labels || []).join(", "), placeholder: "comma, separated" }))),
    field("Depends on", el("input", { name: "depends_on", id: "edit-depends", value: (task.depends_on || []).join(", "), placeholder: "task ids, comma separated" })),
    // The fields in New task's order (templates/board/board.html): one form to learn.
    field("Repository", repositoryMenu(task)),
    field("Touches", el("input", { name: "touches", id: "edit-touches", value: (task.touches || []).join(", "),
      placeholder: "src/**, docs/*.md", "aria-describedby": "edit-hint-touches" }), hint("touches")),
    field("Verify command", el("input", { name: "verify_cmd", id: "edit-verify", value: (task.metadata || {}).verify_cmd || "",
      placeholder: "pytest -q", "aria-describedby": "edit-hint-verify_cmd" }), hint("verify_cmd")),
    routeFields(task.route || {}),
    el("p", { class: "form-error", id: "edit-error", role: "alert" }),
    el("menu", {},
      el("button", { type: "button", class: "btn ghost", id: "edit-cancel", onclick: () => { editing = null; done.cancelled(); } }, "Cancel"),
      el("button", { type: "submit", class: "btn primary", id: "edit-save" }, "Save")));
  form.addEventListener("submit", (e) => { e.preventDefault(); saveEdit(task.id, form, done); });
  return form;
}

async function saveEdit(id, form, done) {
  const data = new FormData(form);
  const current = state.tasks.get(id) || {};
  const changes = {};
  const title = String(data.get("title") || "").trim();
  if (title !== current.title) changes.title = title;
  const description = String(data.get("description") || "");
  if (description !== (current.description || "")) changes.description = description;
  const priority = parseInt(String(data.get("priority") || "0"), 10);
  if (priority !== current.priority) changes.priority = priority;
  const labels = splitList(data.get("labels"));
  if (labels.join("\n") !== (current.labels || []).join("\n")) changes.labels = labels;
  const repository = String(data.get("repository") || "") || null;
  // The verify command lives in the task's metadata (PATCH replaces it whole).
  const verify = String(data.get("verify_cmd") || "").trim();
  const metadata = { ...(current.metadata || {}) };
  if (verify !== (metadata.verify_cmd || "")) {
    if (verify) metadata.verify_cmd = verify; else delete metadata.verify_cmd;
    changes.metadata = metadata;
  }
  const route = routeBody(String(data.get("route_agent") || "").trim(),
    String(data.get("route_runtime") || ""), data.get("route_labels"));
  if (!sameRoute(route, current.route || null)) changes.route = route;
  const menu = $("#edit-repository");
  if (menu && menu.dataset.ready === "true" && repository !== (current.repository || null)) changes.repository = repository;
  const touches = splitList(data.get("touches"));
  if (touches.join("\n") !== (current.touches || []).join("\n")) changes.touches = touches.length ? touches : null;
  const wanted = splitList(data.get("depends_on"));
  const had = current.depends_on || [];
  const error = $("#edit-error");
  error.textContent = "";
  const button = $("#edit-save");
  button.disabled = true;
  try {
    let saved = null;
    if (Object.keys(changes).length) {
      saved = await api("PATCH", `/api/board/tasks/${enc(id)}`, { ...changes, if_revision: editing.revision });
    }
    for (const dep of wanted.filter((d) => !had.includes(d))) {
      saved = await api("POST", `/api/board/tasks/${enc(id)}/deps`, { depends_on: dep });
    }
    for (const dep of had.filter((d) => !wanted.includes(d))) {
      await api("DELETE", `/api/board/tasks/${enc(id)}/deps/${enc(dep)}`);
      saved = null;
    }
    if (saved === null) saved = await api("GET", `/api/board/tasks/${enc(id)}`);
    editing = null;
    done.saved(saved);
  } catch (err) {
    const body = err.body || {};
    if (body.error === "conflict" && body.reason === "stale_revision" && body.task) {
      done.lost(body.task);
      editNote(body.task, true);
    } else {
      error.textContent = err.message;
    }
  } finally {
    button.disabled = false;
  }
}
