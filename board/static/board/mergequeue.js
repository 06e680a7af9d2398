import { $, bidiMarked, el, api } from "./kit.js";
import { config, state } from "./page.js";

const enc = encodeURIComponent;

// --- merge queues ---------------------------------------------------------------------
// Each repository of the team that lands by queue: who waits to land and where, who
// was sent back to its builder, the gate running now, and the last bisect. First from
// the columns' answer; re-read (at most once a second) when a task moves: an
// approval, a landing, a return.

let timer = null;
export function loadQueuesSoon() {
  if (timer) return;
  timer = setTimeout(() => { timer = null; loadQueues(); }, 1000);
}

const titled = (id, title) => {
  const task = state.tasks.get(id);
  return el("button", { type: "button", class: "link mq-task", "data-task": id, title: id,
    onclick: () => document.dispatchEvent(new CustomEvent("board:open-task", { detail: id })) },
  bidiMarked(title || (task ? task.title : id)));
};

function queueView(q) {
  const waiting = q.entries.filter((e) => e.state === "queued");
  const back = q.entries.filter((e) => e.state === "returned");
  const parts = [el("strong", {}, q.repository), ` · ${q.length} waiting to land`];
  // No list when nobody waits: an empty inline-flex list still took a line's height.
  const list = waiting.length ? el("ol", { class: "mq-line" }, ...waiting.map((e) =>
    el("li", { "data-position": String(e.position) }, titled(e.task_id, e.title)))) : null;
  const run = q.running;
  const gate = run && run.running_gate
    ? el("p", { class: "mq-gate" }, `gate running on ${run.running_gate.slice(0, 12)} (batch of ${run.tasks.length}, run ${run.gate_runs + 1})`)
    : null;
  // A round's work back in review re-enters the line on a person's approval only.
  const inReview = (e) => (state.tasks.get(e.task_id) || {}).status === "in_review";
  const line = (cls, words, entries) => entries.length
    ? el("p", { class: cls }, words, ...entries.map((e) => titled(e.task_id, e.title)))
    : null;
  const sent = line("mq-back", "back with their builder: ", back.filter((e) => !inReview(e)));
  const again = line("mq-back", "to approve again before it lands: ", back.filter(inReview));
  const b = q.last_bisect;
  const bisect = b
    ? el("p", { class: "mq-bisect muted" }, `last bisect: ${b.gate_runs} gate runs over ${b.tasks.length} tasks`,
      b.culprits.length ? [", culprit ", ...b.culprits.map((id) => titled(id))] : ", no culprit")
    : null;
  return el("div", { class: "mq", "data-repository": q.repository }, el("p", {}, ...parts), list, gate, sent, again, bisect);
}

// The queues as the columns' answer or GET /api/board/merge-queue gave them.
export function showQueues(queues) {
  // Approve's dialog asks: by the task's repository, or the path a task without one names.
  state.queueRepositories = new Set(queues.flatMap((q) => [q.repository, q.repo_path]));
  const box = $("#merge-queue");
  if (!box) return;
  box.hidden = !queues.length;
  box.replaceChildren(el("h2", { class: "mq-title" }, "Merge queue"), ...queues.map(queueView));
}

export async function loadQueues() {
  if (!$("#merge-queue")) return;
  showQueues(await api("GET", `/api/board/merge-queue?team=${enc(config.team)}`).catch(() => []));
}
