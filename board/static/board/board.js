// The live board: REST for reads and writes, the websocket for every committed change.
// The legal status targets come from the server's transition table (board-config).
//
// The first view is every column's first page (GET /api/board/columns; the terminal
// ones most recently changed first) with the totals beside it (GET /api/board/counts):
// two requests. The columns' answer also carries what the cards and panels say about
// them (scope waits, stalled runs, merge queues); later changes re-read those from
// their own endpoints. "load more" follows each column's next link. So the page costs the same whatever
// the size of the team's history. Filters live in the URL's query string and apply
// to the pages and to live frames alike.
import {
$, ago, bidiMarked, el, api, timed, startClock, initials, money, tokens, toast, ask,
} from "./kit.js";
import { clearDrafts, draftsFor, reviewView } from "./review.js";
import { markdown } from "./markdown.js";
import * as S from "./state.js";
import { FILTER_KEYS, NEEDS, homeOf, routeBody, routeText, sameRoute, splitList, waiting } from "./state.js";
import { cardNode, forgetCard, forgetCards } from "./cards.js";
import { renderAgents, teamAgents } from "./agents.js";
import { sendWatch, unwatchOutput, watchOutput, logFrame } from "./output.js";
import { forgetTrace, loadTrace, traceFrame, traceSection } from "./trace.js";
import { loadSpend, loadSpendSoon } from "./spend.js";
import { loadQueuesSoon, showQueues } from "./mergequeue.js";
import { closeEditor, editForm, editNote, fillRepositories, openEditor } from "./editor.js";
import { commentForm, knownNames, loadComments } from "./discussion.js";

import { config, label, live, state } from "./page.js";

const team = config.team;
const STATUSES = config.statuses;
const COLUMNS = state.order;
const TERMINAL = state.terminal;
const { tasks, doneIds, pending, toolAsks } = state;
const filters = state.filters;
let lastSeq = 0;                  // highest event seq applied
let helloSeq = 0;                 // frames up to here may already be in what we loaded
let retryMs = 500;
let epoch = 0;                    // bumps on every full reload: late answers are dropped
let activeTab = null;             // the column shown on a phone
let tabPicked = false;            // the person chose one: keep it
let tabSettled = false;           // the first non-empty column, once the counts said

const enc = encodeURIComponent;

// --- filters (kept in the URL) ----------------------------------------------------

function filtersActive() { return S.filtersActive(filters); }

function filterQuery() { return S.filterQuery(team, filters); }

function writeUrl(push) {
  const params = new URLSearchParams(location.search);
  params.set("team", team);
  for (const key of FILTER_KEYS) {
    if (filters[key]) params.set(key, filters[key]); else params.delete(key);
  }
  const url = `${location.pathname}?${params}`;
  if (url === location.pathname + location.search) return;
  if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
}

function matches(task) { return S.matches(task, filters, state.noneConfigured); }

function showFilters() {
  const form = $("#filters");
  for (const key of FILTER_KEYS) {
    const input = form.elements[key];
    if (input.value !== filters[key]) {
      if (input.tagName === "SELECT" && filters[key] && ![...input.options].some((o) => o.value === filters[key])) {
        input.append(el("option", { value: filters[key] }, filters[key]));
      }
      input.value = filters[key];
    }
    input.dataset.active = filters[key] ? "true" : "false";
    if (filters[key]) input.hidden = false;   // a filter set is shown (the routine's)
  }
  $("#clear-filters").hidden = !filtersActive();
}

function setFilters(next, push) {
  const changed = FILTER_KEYS.some((k) => (next[k] || "") !== filters[k]);
  if (!changed) return;
  for (const key of FILTER_KEYS) filters[key] = (next[key] || "").trim();
  writeUrl(push);
  showFilters();
  reloadColumns();
}

// --- columns ---------------------------------------------------------------------

// Each column's state (state.js), with the nodes that show it.
const columns = state.columns;
for (const status of COLUMNS) {
  const node = $(`.column[data-status="${status}"]`);
  Object.assign(columns[status], {
    node,
    cards: $("[data-cards]", node),
    countEl: $("[data-count]", node),
    more: $("[data-load-more]", node),
    tab: $(`[data-tab="${status}"]`),
  });
  columns[status].more.addEventListener("click", () => loadPage(status));
}

const statusOf = (task) => S.statusOf(state, task);
const columnOf = (task) => S.columnOf(state, task);

function renderCount(col) {
  const text = col.count === null ? "·" : col.count.toLocaleString();
  col.countEl.textContent = text;
  col.countEl.title = col.count === null ? "" : `${col.count} task(s)`;
  if (col.tab) $("[data-tab-count]", col.tab).textContent = text;
  const left = col.count === null ? null : Math.max(0, col.count - col.ids.size);
  const more = Boolean(col.next) && left !== 0;
  col.more.hidden = !more;
  if (more) {
    col.more.textContent = left === null ? "Load more"
      : `Load ${Math.min(left, pageSize(col.status))} more (${left.toLocaleString()} left)`;
  }
}

function renderColumn(status) {
  const col = columns[status];
  const here = S.columnTasks(state, status);
  const focusedId = document.activeElement && document.activeElement.dataset
    ? document.activeElement.dataset.taskId : null;
  col.cards.replaceChildren(...here.map(cardNode));
  if (focusedId && col.ids.has(focusedId)) {
    const again = col.cards.querySelector(`[data-task-id="${CSS.escape(focusedId)}"]`);
    if (again && document.activeElement !== again) again.focus({ preventScroll: true });
  }
  col.node.dataset.loading = col.next === undefined ? "true" : "false";
  if (status === NEEDS) {
    // The cards decide once the column is wholly loaded; the total (which a live
    // frame and the counts' answer can both have counted) only while pages remain.
    const empty = !(col.ids.size || (col.next && col.count));
    col.node.hidden = empty;
    if (col.tab) col.tab.hidden = empty;
  }
  renderCount(col);
}

function renderAll() {
  for (const status of COLUMNS) renderColumn(status);
  renderTabs();
  renderLabels();
  updateScrollHint();
}

function pageSize(status) { return TERMINAL.has(status) ? config.page.terminal : config.page.active; }

// "Load more": the column's next page, as the last one named it.
async function loadPage(status) {
  const col = columns[status];
  if (col.loading || !col.next) return;
  const mine = epoch;
  col.loading = true;
  col.more.disabled = true;
  try {
    const page = await api("GET", col.next);
    if (mine !== epoch) return;
    for (const task of page.results) place(task, { fromPage: true });
    col.next = page.next || null;
    renderColumn(status);
    renderTabs();
    renderLabels();
  } catch (err) {
    if (mine === epoch) toast(`Could not load more of ${label(status)}: ${err.message}`, "bad");
  } finally {
    col.loading = false;
    col.more.disabled = false;
  }
}

async function loadCounts() {
  const mine = epoch;
  try {
    const body = await api("GET", `/api/board/counts?${filterQuery()}`);
    if (mine !== epoch) return;
    for (const status of COLUMNS) {
      columns[status].count = body.counts[status] || 0;
      renderCount(columns[status]);
    }
    renderTabs();
  } catch (err) { /* the headers keep what they have */ }
}

// Counts a live frame could not settle exactly (a card we never loaded, under a
// filter) are asked again, at most about once a second.
let countsTimer = null;
function recount() {
  if (countsTimer) return;
  countsTimer = setTimeout(() => { countsTimer = null; loadCounts(); }, 800);
}

// Every column's first page, its total and the event seq they are as of, in one
// request (GET /api/board/columns): the first view costs the same whatever the
// size of the team's history. Changes that arrive meanwhile wait, then apply.
let holding = null;
async function reloadColumns() {
  epoch += 1;
  const mine = epoch;
  tabSettled = false;
  S.clearState(state);
  forgetCards();
  renderAll();
  holding = [];
  const params = filterQuery();
  params.set("limit", String(config.page.active));
  params.set("terminal_limit", String(config.page.terminal));
  // The totals come on their own: counting reads the whole history, the cards
  // need only a page of each column, and should not wait for it.
  params.set("counts", "false");
  let counted = null;
  try {
    const board = await api("GET", `/api/board/columns?${params}`);
    // Asked once the cards are in hand, so the two never compete on the server.
    counted = loadCounts();
    if (mine !== epoch) return null;
    for (const status of COLUMNS) {
      const col = columns[status];
      const page = board.columns[status] || { results: [], next: null };
      for (const task of page.results) place(task, { fromPage: true });
      col.next = page.next || null;
    }
    // What the cards and panels say, as of the same answer (no request of their own).
    S.setScopeWaits(state, board.scope_waits || {});
    for (const run of board.stalled_runs || []) S.noteStalled(state, run.task_id, run.id, run.stalled_at);
    if (board.merge_queues) showQueues(board.merge_queues);
    renderAll();
    await Promise.all([counted, loadToolAsks()]);
    return board;
  } catch (err) {
    if (mine === epoch) toast(`Could not load the board: ${err.message}`, "bad");
    return null;
  } finally {
    if (mine === epoch) {
      const held = holding || [];
      holding = null;
      // Already in what we loaded, or not: the revisions tell; the counts are asked again.
      for (const frame of held) upsert(frame.task, { ...frame, seq: -1 });
    }
  }
}

const place = (task, how) => S.place(state, task, how);

// Which ready tasks wait for their paths: as of the columns' answer, then asked again
// (GET /api/board/scope-waits), at most about once a second, after any change of the board.
async function loadScopeWaits() {
  const mine = epoch;
  try {
    const body = await api("GET", `/api/board/scope-waits?team=${enc(team)}`);
    if (mine !== epoch) return;
    if (!S.setScopeWaits(state, body.waits || {})) return;
    renderAll();
    // Only the line that says it: the rest of the detail (its review) stays.
    const line = $("#detail-touches");
    const shown = state.selected && tasks.get(state.selected);
    if (line && shown) line.textContent = S.scopeText(shown, state.scopeWaits.get(shown.id));
  } catch (err) { /* the cards keep what they said */ }
}
let scopeTimer = null;
function rescope() {
  if (scopeTimer) return;
  scopeTimer = setTimeout(() => { scopeTimer = null; loadScopeWaits(); }, 800);
}

// A task-change frame (or our own write's answer): move the card, keep the counts.
function upsert(task, frame) {
  const change = S.applyChange(state, task, frame, helloSeq);
  if (change.ignore) return;
  if (task.scope || state.scopeWaits.size) rescope();
  if (change.same) { renderDetailIfShown(); return; }
  if (change.recount) recount();
  for (const status of change.dirty) renderColumn(status);
  renderTabs();
  renderLabels();
  renderDetailIfShown();
}

// --- tool calls waiting for a person (GET /api/approvals, live frames) --------------

function noteToolAsk(ask) {
  S.noteToolAsk(state, ask);
  forgetCard(ask.task_id);
  const task = tasks.get(ask.task_id);
  if (task) renderColumn(columnOf(task));
}

// --- runs that said nothing for CLAWBOO_STALL_MS (the columns' answer, live frames) --

function noteStalled(taskId, execution, at) {
  S.noteStalled(state, taskId, execution, at);
  forgetCard(taskId);
  const task = tasks.get(taskId);
  if (task) renderColumn(columnOf(task));
}

async function loadToolAsks() {
  try {
    const asks = await api("GET", `/api/approvals?team=${enc(team)}`);
    for (const ask of asks) noteToolAsk(ask);
  } catch (err) { /* the cards show what live frames bring */ }
}

async function decideToolCall(id, decision) {
  try {
    noteToolAsk(await api("POST", `/api/approvals/${enc(id)}`, { decision }));
  } catch (err) {
    toast(`Could not answer the tool call: ${err.message}`, "bad");
  }
}

function cardEl(id) { return $(`.card[data-task-id="${CSS.escape(id)}"]`); }

// Events on the columns, not on each card: cards are re-rendered often.
const board = $("#columns");
board.addEventListener("click", (e) => {
  const card = e.target.closest(".card");
  const toolDecision = e.target.closest("[data-tool-decision]");
  if (card && toolDecision) {
    e.stopPropagation();
    decideToolCall(toolDecision.closest("[data-tool-approval]").dataset.toolApproval, toolDecision.dataset.toolDecision);
    return;
  }
  const decision = e.target.closest("[data-approval]");
  if (card && decision) { e.stopPropagation(); decideApproval(tasks.get(card.dataset.taskId), decision.dataset.approval); return; }
  if (card) select(card.dataset.taskId);
});

// A person's decision on a waiting task (POST /api/board/tasks/{id}/approval),
// naming the revision they saw: a task changed meanwhile is refused, not approved.
async function decideApproval(task, decision) {
  if (!task) return;
  const body = { decision, revision: task.revision };
  if (decision === "deny") {
    const data = await ask({
      title: `Deny "${task.title}"?`,
      body: el("label", {}, "No agent will take it. Why (optional)",
        el("input", { name: "reason", maxlength: "2000", id: "deny-reason" })),
      ok: "Deny", okClass: "danger",
    });
    if (data === null) return;
    const reason = String(data.get("reason") || "").trim();
    if (reason) body.reason = reason;
  }
  try {
    upsert(await api("POST", `/api/board/tasks/${enc(task.id)}/approval`, body));
  } catch (err) {
    toast(`Could not ${decision} "${task.title}": ${err.message}`, "bad");
  }
}
board.addEventListener("keydown", (e) => {
  const card = e.target.closest(".card");
  if (!card || e.target !== card) return;
  const task = tasks.get(card.dataset.taskId);
  if (!task) return;
  if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(task.id); return; }
  if (e.key === "m" || e.key === "M") { e.preventDefault(); moveMenu(task); return; }
  const nav = { ArrowDown: [0, 1], ArrowUp: [0, -1], ArrowRight: [1, 0], ArrowLeft: [-1, 0] }[e.key];
  if (nav) { e.preventDefault(); focusNeighbour(card, nav[0], nav[1]); }
});

function visibleColumns() {
  return COLUMNS.filter((s) => columns[s].node.offsetParent !== null);
}

function focusNeighbour(card, dx, dy) {
  const status = card.closest(".column").dataset.status;
  if (dy) {
    const sibling = dy > 0 ? card.nextElementSibling : card.previousElementSibling;
    if (sibling) sibling.focus();
    return;
  }
  const shown = visibleColumns();
  const index = card.parentElement ? [...card.parentElement.children].indexOf(card) : 0;
  for (let i = shown.indexOf(status) + dx; i >= 0 && i < shown.length; i += dx) {
    const cards = columns[shown[i]].cards.children;
    if (cards.length) { cards[Math.min(index, cards.length - 1)].focus(); return; }
  }
}

// The skip link (the page's first tab stop) lands on the first card shown, so the
// arrows work after two key presses rather than a tour of the header and filters.
$("#skip-to-cards").addEventListener("click", (e) => {
  e.preventDefault();
  for (const status of visibleColumns()) {
    const first = columns[status].cards.firstElementChild;
    if (first) { first.focus(); return; }
  }
  board.focus();
});

// --- drag and drop ---------------------------------------------------------------

let drag = null;                  // {id, from, over}

function legal(from, to) { return (config.transitions[from] || []).includes(to); }

function illegalReason(task, to) {
  const from = statusOf(task);
  const allowed = (config.transitions[from] || []).map(label);
  return `"${task.title}" cannot move from ${label(from)} to ${label(to)}` +
    (allowed.length ? `: from ${label(from)} it can go to ${allowed.join(", ")}.` : `: ${label(from)} is final.`);
}

board.addEventListener("dragstart", (e) => {
  const card = e.target.closest(".card");
  const task = card && tasks.get(card.dataset.taskId);
  if (!task || pending.has(task.id)) { e.preventDefault(); return; }
  drag = { id: task.id, from: statusOf(task), over: null };
  e.dataTransfer.setData("text/plain", task.id);
  e.dataTransfer.effectAllowed = "move";
  card.classList.add("drag-source");
  document.body.classList.add("dragging");
  for (const status of STATUSES) {
    if (status === drag.from) continue;
    columns[status].node.classList.add(legal(drag.from, status) ? "drop-ok" : "drop-no");
  }
});

board.addEventListener("dragover", (e) => {
  if (!drag) return;
  const column = e.target.closest(".column");
  if (!column) return;
  const to = column.dataset.status;
  drag.over = to;
  if (to !== drag.from && legal(drag.from, to)) {
    e.preventDefault();   // only a legal target accepts the drop
    e.dataTransfer.dropEffect = "move";
    for (const status of STATUSES) columns[status].node.classList.toggle("drop-hover", status === to);
  } else {
    for (const status of STATUSES) columns[status].node.classList.remove("drop-hover");
  }
});

board.addEventListener("drop", (e) => {
  if (!drag) return;
  const column = e.target.closest(".column");
  if (!column) return;
  e.preventDefault();
  const task = tasks.get(drag.id);
  const to = column.dataset.status;
  const legalDrop = task && to !== drag.from && legal(drag.from, to);
  // The move re-renders the card, so the dragged node leaves the page and its
  // dragend never arrives: the drag ends here, not there.
  endDrag();
  if (legalDrop) moveTask(task, to);
});

// Take every trace of a drag off the page: the columns' lit and dimmed states, the
// body's drag mode and the source card's look (on whatever node shows it now).
function endDrag() {
  drag = null;
  document.body.classList.remove("dragging");
  for (const status of STATUSES) columns[status].node.classList.remove("drop-ok", "drop-no", "drop-hover");
  for (const node of document.querySelectorAll(".card.drag-source")) node.classList.remove("drag-source");
}

board.addEventListener("dragend", () => {
  if (!drag) return;
  const { id, from, over } = drag;
  endDrag();
  const task = tasks.get(id);
  if (task && over && over !== from && !legal(from, over)) {
    snapBack(id);
    toast(illegalReason(task, over), "bad");
  }
});

function snapBack(id) {
  const card = cardEl(id);
  if (!card) return;
  card.classList.remove("snapped");
  void card.offsetWidth;  // restart the animation
  card.classList.add("snapped");
}

// --- moves -----------------------------------------------------------------------

function needsOverride(task) {
  const v = task.verification;
  return Boolean(v && v.verdict && v.verdict !== "pass");
}

// Move a task, through whatever the move needs first (an agent to claim it for, an
// override of a failing verdict, an approval). The card shows in its new column at
// once; a refusal puts it back and says why.
async function moveTask(task, to) {
  const from = statusOf(task);
  if (to === from) return false;
  if (!legal(from, to)) { snapBack(task.id); toast(illegalReason(task, to), "bad"); return false; }
  if (to === "done" && from === "in_review") return approve(task);
  const body = { to };
  if (to === "done" && needsOverride(task)) {
    const answer = await overrideDialog(task);
    if (!answer) { snapBack(task.id); return false; }
    body.human_override = { reason: answer.reason };
  }
  if (to === "in_progress") {
    const agent = await claimDialog(task);
    if (!agent) { snapBack(task.id); return false; }
    body.agent_id = agent;
  }
  showPending(task, to);
  try {
    const moved = await api("POST", `/api/board/tasks/${enc(task.id)}/transition`, body);
    clearPending(task);
    upsert(moved);
    return true;
  } catch (err) {
    clearPending(task);
    snapBack(task.id);
    toast(`Could not move "${task.title}" to ${label(to)}: ${err.message}`, "bad");
    renderDetailIfShown(true);
    return false;
  }
}

function showPending(task, to) {
  for (const status of S.startMove(state, task, to)) renderColumn(status);
}

function clearPending(task) {
  for (const status of S.endMove(state, task)) renderColumn(status);
}

// --- dialogs (one <dialog>, filled per question) ------------------------------------

async function claimDialog(task) {
  const names = (await teamAgents()).map((a) => a.id);
  const fallback = task.assignee_agent_id || names[0] || "";
  const field = names.length
    ? el("select", { name: "agent", id: "claim-agent" }, names.map((n) => el("option", { value: n, selected: n === fallback }, n)))
    : el("input", { name: "agent", id: "claim-agent", value: fallback, placeholder: "agent id", required: true });
  const data = await ask({
    title: `Start "${task.title}"`,
    body: [el("p", { class: "muted" }, "Moving a task into In progress claims it for an agent; its executor picks the claim up."),
      el("label", {}, "Claim for agent", field)],
    ok: "Claim and start",
    validate: (d) => (String(d.get("agent") || "").trim() ? null : "Name the agent that works it."),
  });
  return data ? String(data.get("agent")).trim() : null;
}

function overrideField(task) {
  const v = task.verification || {};
  const override = `Landing it anyway is an override recorded as ${config.user}'s, with your reason.`;
  // Nothing ran to fail: say so, as the card and the panel do, not "fail" over "(none configured)".
  const unverified = S.unverified(v, state.noneConfigured);
  return [
    unverified
      ? el("p", { class: "unverified" }, "Nothing verified it: no verify command is configured for this task, its agent or its repository. ", override)
      : el("p", {}, "Verification is ", el("strong", { class: "verdict-" + v.verdict }, v.verdict), `. ${override}`),
    v.evidence && !unverified ? el("pre", { class: "evidence" }, v.evidence.slice(-1500)) : null,
    el("label", {}, "Why override the verdict?", el("textarea", { name: "reason", id: "override-reason", rows: "3", required: true })),
  ];
}

async function overrideDialog(task) {
  const data = await ask({
    title: `Override verification of "${task.title}"`,
    body: overrideField(task),
    ok: "Override and move to Done",
    okClass: "danger",
    validate: (d) => (String(d.get("reason") || "").trim() ? null : "Say why the verdict is overridden."),
  });
  return data ? { reason: String(data.get("reason")).trim() } : null;
}

async function moveMenu(task) {
  const from = statusOf(task);
  const targets = config.transitions[from] || [];
  let chosen = null;
  const buttons = targets.map((to) => el("button", {
    type: "button", class: "btn", "data-move-to": to,
    onclick: () => { chosen = to; $("#ask").close(); },
  }, label(to)));
  buttons.forEach((b, i) => b.addEventListener("keydown", (e) => {
    const step = { ArrowDown: 1, ArrowUp: -1 }[e.key];
    if (step) { e.preventDefault(); buttons[(i + step + buttons.length) % buttons.length].focus(); }
  }));
  await ask({
    title: `Move "${task.title}"`,
    body: targets.length
      ? [el("p", { class: "muted" }, `From ${label(from)} to:`), el("div", { class: "choices", id: "move-choices" }, buttons)]
      : [el("p", {}, `${label(from)} is final: nothing to move to.`)],
    ok: null,
  });
  if (chosen) {
    await moveTask(task, chosen);
    const card = cardEl(task.id);
    if (card) card.focus();
  }
}

// --- review ------------------------------------------------------------------------

let lastNote = null;               // what the last review action said, per task
function say(text, kind) {
  const said = state.tasks.get(state.selected);
  lastNote = { id: state.selected, text, kind: kind || "", status: said ? said.status : null };
  const note = $("#review-note");
  if (note) { note.textContent = text; note.dataset.kind = lastNote.kind; }
  toast(text, kind);
}

function noteWorkspace(taskId, review) {
  const path = review && review.workspace ? review.workspace.repo_path : null;
  if (path) state.workspaceRepos.set(taskId, path);
}

async function approve(task) {
  const override = needsOverride(task);
  // A task naming no repository works in its agent's default one: which one, and so
  // whether it lands by queue, its review's workspace says (read here when its panel
  // never was, e.g. a card dragged to Done).
  if (task.worktree_ref && !S.landsByQueue(state, task) && !state.workspaceRepos.has(task.id)) {
    try {
      noteWorkspace(task.id, await api("GET", `/api/board/tasks/${enc(task.id)}/review`));
    } catch (err) { /* the dialog says what it knows */ }
  }
  // A repository that lands by queue lands it later, after the gate: the dialog said it
  // landed and moved to Done now (the demo's does), and the task stayed in review.
  const queued = S.landsByQueue(state, task);
  const data = await ask({
    title: `Approve "${task.title}"`,
    // A task worked in place has no branch: nothing lands, and the dialog said it would.
    body: [el("p", { id: "approve-what" }, !task.worktree_ref
      ? "Approving moves it to Done. It has no worktree, so there is no change to land."
      : queued
        ? `Approving puts it in ${task.repository || "its repository"}'s merge queue: it lands on its base branch, and moves to Done, once the stacked change passes the gate.`
        : "Approving lands the task's change on its base branch and moves it to Done."),
    override ? overrideField(task) : null],
    ok: !task.worktree_ref ? "Approve" : queued ? "Approve and queue" : "Approve and land",
    okClass: override ? "danger" : "ok",
    validate: (d) => (override && !String(d.get("reason") || "").trim() ? "Say why the verdict is overridden." : null),
  });
  if (!data) { snapBack(task.id); renderDetailIfShown(true); return false; }
  const body = override ? { human_override: { reason: String(data.get("reason")).trim() } } : {};
  showPending(task, "done");
  try {
    const result = await api("POST", `/api/board/tasks/${enc(task.id)}/approve`, body);
    clearPending(task);
    upsert(result.task);
    if (result.result === "conflict") {
      say(`Not landed: conflict in ${result.conflicts.join(", ")}; ` +
          (result.sent === "rework" ? "sent back to its agent." : "blocked."), "bad");
    } else if (result.result === "landed") {
      const push = result.push;
      // The landing stands; a push that failed leaves the remote behind, which the
      // person must hear here, not only in a comment (the next landing retries it).
      if (push && !push.pushed) {
        say(`Landed ${result.commit.slice(0, 12)} on ${result.base_branch}, but the push of ` +
            `${push.branch} to ${push.remote} failed: ${push.error || "unknown error"}`, "bad");
      } else {
        say(`Landed ${result.commit.slice(0, 12)} on ${result.base_branch}.`, "ok");
      }
    } else if (result.result === "queued") {
      say(`Queued to land: position ${result.position} in the merge queue.`, "ok");
      loadQueuesSoon();
    } else {
      say("Approved.", "ok");
    }
    return true;
  } catch (err) {
    clearPending(task);
    snapBack(task.id);
    say(err.message, "bad");
    return false;
  }
}

async function requestChanges(task) {
  const comments = draftsFor(task.id);
  const data = await ask({
    title: `Request changes on "${task.title}"`,
    body: [el("p", { class: "muted" }, "The task goes back to its agent with your feedback; it keeps its worktree and branch."),
      comments.length ? el("p", { id: "review-comment-count" }, `${comments.length} line comment(s) go with it (file:line).`) : null,
      el("label", {}, "What should change?", el("textarea", { name: "feedback", id: "review-feedback", rows: "4" }))],
    ok: "Send back",
    validate: (d) => (comments.length || String(d.get("feedback") || "").trim() ? null : "Write what should change first."),
  });
  if (!data) return;
  const body = { comments };
  const feedback = String(data.get("feedback") || "").trim();
  if (feedback) body.feedback = feedback;
  try {
    upsert(await api("POST", `/api/board/tasks/${enc(task.id)}/request-changes`, body));
    clearDrafts(task.id);
    say("Sent back with your feedback.", "ok");
  } catch (err) { say(err.message, "bad"); }
}

// --- the detail panel ----------------------------------------------------------------

function statusMenu(task) {
  const options = [task.status, ...(config.transitions[task.status] || [])];
  return el("select", {
    class: "status-menu", "aria-label": "Move to",
    onchange: async (e) => {
      const moved = await moveTask(task, e.target.value);
      if (!moved) e.target.value = task.status;
    },
  }, options.map((s) => el("option", { value: s, selected: s === task.status },
    s === task.status ? label(s) + " (current)" : label(s))));
}

let detailKey = null;
function renderDetailIfShown(force) {
  if (!state.selected) return;
  const shown = tasks.get(state.selected);
  if (!shown) return;
  // Only when the task changed: the panel reads its review (git) and may hold
  // what is being typed.
  const key = `${shown.id}:${shown.revision}`;
  // An open editor keeps what is being typed: it is told the task moved on instead.
  const editing = openEditor();
  if (editing && editing.id === shown.id && !force) {
    if (shown.revision !== editing.revision) editNote(shown);
    return;
  }
  if (force || key !== detailKey) { detailKey = key; renderDetail(shown); }
}

// What the editor's outcome does to the page.
const editDone = {
  saved(task) { upsert(task); renderDetailIfShown(true); toast("Saved.", "ok"); },
  cancelled() { renderDetailIfShown(true); },
  lost(task) { upsert(task); },
};

// Why a Todo task waits, in the detail panel: the card's reason, said whole.
function waitWords(task) {
  const why = S.waitReason(state, task, ago);
  return why ? why.title : "for an agent to take it";
}

async function renderDetail(task) {
  const panel = $("#detail");
  panel.hidden = false;
  const v = task.verification;
  const cost = task.cost || {};
  panel.replaceChildren(
    el("button", { type: "button", class: "btn ghost close", "aria-label": "Close", onclick: () => select(null) }, "×"),
    el("h2", { id: "detail-title" }, bidiMarked(task.title)),
    el("div", { class: "detail-actions" }, el("label", {}, "Status ", statusMenu(task)),
      el("button", { type: "button", class: "btn", id: "edit-task", onclick: () => {
        $("#edit-slot").replaceChildren(editForm(tasks.get(task.id) || task, editDone));
        $("#edit-title").focus();
      } }, "Edit")),
    el("div", { id: "edit-slot" }),
    el("dl", {},
      el("dt", {}, "id"), el("dd", {}, task.id),
      el("dt", {}, "assignee"), el("dd", {}, task.assignee_agent_id || "—"),
      el("dt", {}, "repository"), el("dd", { id: "detail-repository" }, S.runRepositoryText(task, null)),
      el("dt", {}, "labels"), el("dd", {}, (task.labels || []).join(", ") || "—"),
      el("dt", {}, "route"), el("dd", { id: "detail-route" }, routeText(task.route) || "any agent of the team"),
      el("dt", {}, "touches"), el("dd", { id: "detail-touches" }, S.scopeText(task, state.scopeWaits.get(task.id))),
      task.status === "todo" ? [el("dt", {}, "waits"), el("dd", { id: "detail-waits" }, waitWords(task))] : "",
      el("dt", {}, "attempts"), el("dd", {}, `${task.attempts}${task.max_attempts ? " / " + task.max_attempts : ""}`),
      el("dt", {}, "depends on"), el("dd", {}, bidiMarked((task.depends_on || []).map((id) => {
        const dep = tasks.get(id);
        return `${dep ? dep.title : id} (${dep ? label(dep.status) : doneIds.has(id) ? label("done") : "not on screen"})`;
      }).join(", ") || "—")),
      el("dt", {}, "verification"), el("dd", { class: v && v.verdict ? "verdict-" + v.verdict : "" },
        v ? `${v.verdict || "—"}${v.human_override ? " (override by " + v.human_override.by + ")" : ""}` : "unverified"),
      el("dt", {}, "cost"), el("dd", { id: "detail-cost" }, el("span", { id: "detail-cost-text" }, S.costText(cost)),
        task.max_run_cents ? `; ceiling ${task.max_run_cents}¢ a run` : ""),
      el("dt", {}, "worktree"), el("dd", {}, task.worktree_ref ? `${task.worktree_ref} @ ${task.branch_ref || ""}` : "—"),
      el("dt", {}, "error"), el("dd", {}, task.error || "—"),
      el("dt", {}, "feedback"), el("dd", { id: "detail-feedback" }, S.feedbackText(task)),
      el("dt", {}, "created"), el("dd", {}, timed("time", "", "ago", task.created_at)),
      el("dt", {}, "updated"), el("dd", {}, timed("time", "", "ago", task.updated_at)),
    ),
    task.description ? el("pre", {}, task.description) : "",
    el("div", { id: "review" }),
    traceSection(),
    el("section", { id: "run-output", class: "run-output", hidden: true },
      el("h3", {}, "Output ", el("span", { class: "muted", id: "run-output-state" }),
        " ", el("a", { id: "run-log-download", download: "" }, "download full log")),
      el("pre", { id: "run-log", class: "run-log", "aria-live": "off" })),
    el("h3", {}, "Comments"), el("ol", { id: "comments", class: "comments" }),
    commentForm(task),
  );
  watchOutput(task);
  loadTrace(task.id);
  // Which repository its run works in is the server's answer (its agent's default
  // when the task names none): the task's read carries it.
  api("GET", `/api/board/tasks/${enc(task.id)}`).then((read) => {
    const line = $("#detail-repository");
    if (line && state.selected === task.id) line.textContent = S.runRepositoryText(read, read.run_repository);
  }).catch(() => { /* the panel keeps the task's own */ });
  try {
    const id = enc(task.id);
    const [, data] = await Promise.all([
      loadComments(task.id),
      api("GET", `/api/board/tasks/${id}/review`),
    ]);
    noteWorkspace(task.id, data);
    if (state.selected !== task.id) return;
    const note = S.noteStands(lastNote, task) ? lastNote : null;
    $("#review").replaceChildren(reviewView(task, data, { note, approve, requestChanges }));
    // With the runs in hand, the cost says what their total says: "cost unknown" for
    // runs with no price, where it read "0¢" above a total of "cost unknown".
    const costLine = $("#detail-cost-text");
    if (costLine) costLine.textContent = S.costText(data.cost || cost, data.executions);
  } catch (err) { /* the panel keeps what it has */ }
}

renderAgents();
setInterval(renderAgents, 15000);
// An agent or a budget changed what a waiting card says (agents.js, spend.js).
document.addEventListener("board:waits", () => {
  renderAll();
  const line = $("#detail-waits");
  const shown = state.selected && tasks.get(state.selected);
  if (line && shown) line.textContent = waitWords(shown);
});

// A task named in the merge queue's panel opens like a card.
document.addEventListener("board:open-task", (event) => select(event.detail));

function select(id) {
  const before = state.selected;
  if (id !== before) { closeEditor(); unwatchOutput(); forgetTrace(); }
  state.selected = id;
  detailKey = null;
  for (const key of [before, id]) {
    const task = key && tasks.get(key);
    if (task) renderColumn(columnOf(task));
  }
  if (!id) $("#detail").hidden = true;
  renderSide();
  if (id) renderDetailIfShown(true);
  // The open task is part of the address (?task=…): a link to it opens it here.
  const params = new URLSearchParams(location.search);
  if (id) params.set("task", id); else params.delete("task");
  const url = `${location.pathname}?${params}`;
  if (url !== location.pathname + location.search) history.replaceState(null, "", url);
}

// A link to one task (a routine's fire, the admin's "View on site"): its card may
// be past the columns' first pages -- an old done task -- so it is fetched and placed.
async function openLinked() {
  const id = new URLSearchParams(location.search).get("task");
  if (!id) return;
  if (!tasks.has(id)) {
    let task;
    try {
      task = await api("GET", `/api/board/tasks/${enc(id)}`);
    } catch (err) {
      toast(`Could not open task ${id}: ${err.message}`, "bad");
      select(null);
      return;
    }
    if (task.team !== team) {
      toast(`Task "${task.title}" is on the board of team ${task.team}.`, "bad");
      select(null);
      return;
    }
    // A live frame may have brought it (newer) while we asked.
    if (!tasks.has(id) && !place(task, { fromPage: true }).placed) {
      toast(`"${task.title}" is hidden by the filters (or dropped).`, "bad");
      select(null);
      return;
    }
    renderColumn(homeOf(task));
  }
  const shown = tasks.get(id);
  if (!shown) return;
  if (!tabPicked) { activeTab = columnOf(shown); tabPicked = true; renderTabs(); }
  select(id);
  const card = document.querySelector(`.card[data-task-id="${CSS.escape(id)}"]`);
  if (card) card.scrollIntoView({ block: "nearest" });
}

// --- the side panel: the task's detail, and the chat (open or folded away) ---------

const stored = localStorage.getItem("clawboo.chat");
// Folded by default where it would push columns off screen.
let chatOpen = stored ? stored === "open" : window.innerWidth >= 1700;
let unread = 0;
// The Agents button opens the side panel at the agents (Pause/Resume), chat or not.
let agentsOpen = localStorage.getItem("clawboo.agents") === "open";
function renderSide() {
  document.body.dataset.chat = chatOpen ? "open" : "closed";
  document.body.dataset.agents = agentsOpen ? "open" : "closed";
  $("#chat-toggle").setAttribute("aria-pressed", chatOpen ? "true" : "false");
  $("#agents-toggle").setAttribute("aria-pressed", agentsOpen ? "true" : "false");
  $(".layout").classList.toggle("with-side", chatOpen || agentsOpen || Boolean(state.selected));
  if (chatOpen) unread = 0;
  $("#chat-unread").hidden = !unread;
  $("#chat-unread").textContent = String(unread);
  if (chatOpen) $("#chat").scrollTop = $("#chat").scrollHeight;
  updateScrollHint();   // the side panel takes room from the columns
}
$("#chat-toggle").addEventListener("click", () => {
  chatOpen = !chatOpen;
  localStorage.setItem("clawboo.chat", chatOpen ? "open" : "closed");
  renderSide();
});
$("#agents-toggle").addEventListener("click", () => {
  agentsOpen = !agentsOpen;
  localStorage.setItem("clawboo.agents", agentsOpen ? "open" : "closed");
  renderSide();
  if (agentsOpen) $("#agents-panel").scrollIntoView({ block: "nearest" });
});

// --- columns off to the right: a hint that scrolls to them ----------------------------

function updateScrollHint() {
  const box = $("#columns");
  const hint = $("#scroll-hint");
  const right = box.getBoundingClientRect().right;
  const hidden = visibleColumns().filter((s) => columns[s].node.getBoundingClientRect().right > right + 1);
  hint.hidden = !hidden.length || box.scrollWidth <= box.clientWidth;
  if (!hint.hidden) {
    hint.textContent = `${hidden.map(label).join(", ")} →`;
    hint.title = `${hidden.length} more column(s) to the right`;
  }
}
$("#scroll-hint").addEventListener("click", () => {
  const box = $("#columns");
  box.scrollBy({ left: box.scrollWidth, behavior: "smooth" });
});
$("#columns").addEventListener("scroll", updateScrollHint, { passive: true });
window.addEventListener("resize", updateScrollHint);

// --- phone: column tabs ----------------------------------------------------------------

function renderTabs() {
  if (!tabPicked && !tabSettled) {
    // The first column with something in it (an empty backlog is not news).
    const counted = COLUMNS.every((s) => columns[s].count !== null);
    const first = COLUMNS.find((s) => (columns[s].count || columns[s].ids.size) > 0);
    if (counted) { activeTab = first || activeTab || STATUSES[1]; tabSettled = true; }
    else if (!activeTab || !(columns[activeTab].ids.size)) activeTab = first || STATUSES[1] || STATUSES[0];
  }
  for (const status of COLUMNS) {
    const col = columns[status];
    const on = status === activeTab;
    col.node.classList.toggle("active", on);
    if (col.tab) col.tab.setAttribute("aria-selected", on ? "true" : "false");
  }
  updateScrollHint();   // a column shown or hidden (Needs approval) changes what fits
}

for (const status of COLUMNS) {
  const tab = columns[status].tab;
  if (tab) tab.addEventListener("click", () => { tabPicked = true; activeTab = status; renderTabs(); });
}

// --- labels and assignees for the filters -------------------------------------------

const labelsSeen = new Set();
function renderLabels() {
  let grew = false;
  for (const task of tasks.values()) {
    for (const name of task.labels || []) if (!labelsSeen.has(name)) { labelsSeen.add(name); grew = true; }
  }
  if (grew) $("#label-options").replaceChildren(...[...labelsSeen].sort().map((n) => el("option", { value: n })));
}

async function fillAssignees() {
  const select = $("#filter-assignee");
  for (const agent of await teamAgents()) {
    const name = agent.display_name ? `${agent.display_name} (${agent.id})` : agent.id;
    const option = [...select.options].find((o) => o.value === agent.id);
    if (option) option.textContent = name;   // showFilters added it by its bare id (?assignee= in the URL)
    else select.append(el("option", { value: agent.id }, name));
  }
  showFilters();
}

// The routine filter names each of the team's routines as the API does (its tasks'
// title, its schedule and the start of its id: "Tidy the notes · 0 9 * * * ·
// e20e65"), so two routines of one title read apart. It shows once the team has a
// routine, or when a link (the routines page's "N in review") set it.
async function fillRoutines() {
  const select = $("#filter-routine");
  const routines = await api("GET", `/api/routines?team=${enc(team)}`).catch(() => []);
  for (const routine of routines) {
    const name = routine.name || routine.id;
    state.routineNames.set(routine.id, name);
    const option = [...select.options].find((o) => o.value === routine.id);
    if (option) { option.textContent = name; option.title = name; }   // showFilters added it by its bare id
    else select.append(el("option", { value: routine.id, title: name }, name));
  }
  select.hidden = select.options.length < 2;
  showFilters();
  renderAll();   // the fires' cards name their routine now, not its id
}

// --- chat ------------------------------------------------------------------------

function chatLine(frame, live) {
  const log = $("#chat");
  if (live && !chatOpen) { unread += 1; renderSide(); }
  // Narration already names who did it; a person's message is shown as theirs.
  // A host's machine signs as machine-<hash>: people read its host's name (author_name).
  const person = frame.author && frame.author !== "clawboo" ? (frame.author_name || frame.author) : null;
  const who = frame.actor_name || frame.actor || person;
  const at = frame.created_at || new Date().toISOString();
  log.append(el("li", { "data-seq": frame.seq },
    el("span", { class: "avatar" + (who ? "" : " bot"), title: who || "clawboo" }, who ? initials(who) : "✦"),
    el("span", { class: "line" }, person ? el("span", { class: "actor" }, person + ": ") : null,
      person ? markdown(frame.body, knownNames()) : frame.body),
    timed("time", "", "ago", at)));
  while (log.children.length > 300) log.firstChild.remove();
  log.scrollTop = log.scrollHeight;
}

$("#chat-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const field = $("#chat-body");
  const body = field.value.trim();
  if (!body) return;
  try {
    // The line itself comes back over the websocket, like everyone else's.
    await api("POST", `/api/teams/${enc(team)}/chat`, { body });
    field.value = "";
  } catch (err) { toast(`Could not post: ${err.message}`, "bad"); }
});

// --- the socket -----------------------------------------------------------------------

// A task change and its narration share one event seq: apply each frame type
// once per seq, so a replay that overlaps what we have changes nothing.
const applied = new Set();
function apply(frame) {
  if (typeof frame.seq === "number") {
    const key = `${frame.type}:${frame.seq}`;
    if (applied.has(key)) return;
    applied.add(key);
    if (applied.size > 5000) applied.delete(applied.values().next().value);
    lastSeq = Math.max(lastSeq, frame.seq);
  }
  if (frame.type === "task-change") {
    if (frame.tool_approval) noteToolAsk(frame.tool_approval);
    // A new run (a claim), or a task that left in_progress, is not the stalled run.
    if (frame.task && state.stalled.has(frame.task.id)
        && (frame.kind === "claimed" || frame.task.status !== "in_progress")) noteStalled(frame.task.id, null);
    if (holding) holding.push(frame); else upsert(frame.task, frame);
    if (frame.kind === "commented" && frame.task && frame.task.id === state.selected) {
      loadComments(state.selected).catch(() => {});
    }
  }
  else if (frame.type === "chat") chatLine(frame, true);
  else if (frame.type === "log") logFrame(frame);
  else if (frame.type === "event") {
    if (frame.kind === "run_stalled" && frame.payload) noteStalled(frame.task_id, frame.payload.execution_id, frame.payload.stalled_at);
    traceFrame(frame);
  }
}

function setConn(state, text) {
  const badge = $("#conn");
  badge.dataset.state = state;
  badge.textContent = text;
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  live.socket = new WebSocket(`${scheme}://${location.host}/ws/board/?team=${enc(team)}`);
  live.socket.onopen = () => { retryMs = 500; };
  live.socket.onmessage = (msg) => {
    const frame = JSON.parse(msg.data);
    if (frame.type === "hello") {
      setConn("live", "live");
      helloSeq = Math.max(helloSeq, frame.seq);
      // Replay everything after what we have: nothing missed while we were away.
      if (frame.seq > lastSeq) live.socket.send(JSON.stringify({ type: "since", seq: lastSeq }));
      sendWatch();   // a reconnect resumes the open run's output where it left off
      return;
    }
    if (frame.type === "reload") {
      // What we missed is no longer in the log: start over from the tasks.
      lastSeq = frame.seq;
      helloSeq = Math.max(helloSeq, frame.seq);
      reloadColumns();
      return;
    }
    apply(frame);
    if (frame.kind && /^budget_|^cost_changed$/.test(frame.kind)) loadSpendSoon();
    if (frame.kind && /^(completed|changes_requested|review_requested|blocked|metadata_changed)$/.test(frame.kind)) loadQueuesSoon();
  };
  live.socket.onclose = () => {
    setConn("reconnecting", "reconnecting…");
    setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 8000);
  };
}

async function loadChat() {
  try {
    const lines = await api("GET", `/api/teams/${enc(team)}/chat?limit=50`);
    for (const line of lines.reverse()) {
      // A replay after these must not show them twice (nor move lastSeq past a
      // task change we have not applied).
      applied.add(`chat:${line.seq}`);
      chatLine(line);
    }
  } catch (err) { /* chat is narration; the board works without it */ }
}

// --- the page's own controls -----------------------------------------------------------

function openNewTask() {
  fillRepositories($("#new-task-repository"), null);
  $("#new-task").showModal();
}
$("#new-task-btn").addEventListener("click", openNewTask);
$("#new-task-form").addEventListener("submit", async (e) => {
  const form = e.target;
  if (e.submitter && e.submitter.value === "cancel") return;
  e.preventDefault();
  const data = new FormData(form);
  const body = {
    title: data.get("title"), team,
    description: data.get("description") || "",
    priority: parseInt(data.get("priority") || "0", 10),
    labels: String(data.get("labels") || "").split(",").map((s) => s.trim()).filter(Boolean),
  };
  const route = routeBody(data.get("route_agent"), data.get("route_runtime"), data.get("route_labels"));
  if (route) body.route = route;
  if (data.get("backlog")) body.status = "backlog";
  // What judges the work: the server holds it to the staff/allowlist rule (403).
  const verify = String(data.get("verify_cmd") || "").trim();
  if (verify) body.metadata = { verify_cmd: verify };
  const repository = String(data.get("repository") || "");
  if (repository) body.repository = repository;
  const depends = splitList(data.get("depends_on"));
  if (depends.length) body.depends_on = depends;
  const touches = splitList(data.get("touches"));
  if (touches.length) body.touches = touches;
  try {
    const created = await api("POST", "/api/board/tasks", body);
    upsert(created, { kind: "added", seq: Infinity, prev_status: null });
    form.reset();
    $("#new-task-error").textContent = "";
    $("#new-task").close();
    if (!matches(created)) toast(`Created "${created.title}"; the filters hide it.`, "ok");
  } catch (err) {
    $("#new-task-error").textContent = err.message;
  }
});

const filterForm = $("#filters");
filterForm.addEventListener("submit", (e) => e.preventDefault());
let typing = null;
filterForm.addEventListener("input", (e) => {
  const name = e.target.name;
  if (name !== "q" && name !== "label") return;
  clearTimeout(typing);
  // While typing, the URL follows; a search begun is one history entry, not one a key.
  const push = !filters[name];
  typing = setTimeout(() => setFilters(Object.fromEntries(new FormData(filterForm)), push), 300);
});
filterForm.addEventListener("change", () => {
  clearTimeout(typing);
  const next = Object.fromEntries(new FormData(filterForm));
  if (FILTER_KEYS.some((k) => (next[k] || "").trim() !== filters[k])) setFilters(next, true);
  else writeUrl(true);
});
$("#clear-filters").addEventListener("click", () => setFilters({}, true));
window.addEventListener("popstate", () => {
  const next = S.readFilters(location.search);
  if (FILTER_KEYS.some((k) => next[k] !== filters[k])) {
    Object.assign(filters, next);
    showFilters();
    reloadColumns();
  }
});

document.addEventListener("keydown", (e) => {
  if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
  const typingInto = e.target.closest && e.target.closest("input, textarea, select, dialog");
  if (typingInto) {
    if (e.key === "Escape" && e.target.id === "filter-q" && e.target.value) {
      e.target.value = "";
      setFilters({ ...filters, q: "" }, true);
    }
    return;
  }
  if (e.key === "/") { e.preventDefault(); $("#filter-q").focus(); }
  else if (e.key === "n") { e.preventDefault(); openNewTask(); }
  else if (e.key === "Escape" && state.selected) select(null);
});

// --- start -------------------------------------------------------------------------

startClock();
showFilters();
renderSide();
(async () => {
  // The columns say which event they are as of: anything after it comes by "since".
  const [board] = await Promise.all([reloadColumns(), loadChat(), loadSpend()]);
  let seq = board && board.seq;
  if (typeof seq !== "number") {
    const hello = await api("GET", `/api/teams/${enc(team)}/events`).catch(() => null);
    seq = hello ? hello.seq : 0;
  }
  lastSeq = seq;
  helloSeq = seq;
  connect();
  fillAssignees();
  fillRoutines();
  openLinked();
})();
