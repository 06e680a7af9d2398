// The open task's trace: a waterfall of its runs' steps -- attempts, fix rounds, the
// critic's review and its subtasks' runs -- from GET …/trace, grown live by the
// board's ``run_step`` events. The failing steps are marked; each step opens its
// run's log.
import { $, el, api, span } from "./kit.js";

const enc = encodeURIComponent;
let shown = null;   // {task, runs} of the open task

export function traceSection() {
  return el("section", { id: "trace", class: "trace", hidden: true, "aria-label": "Trace" },
    el("h3", {}, "Trace ", el("span", { class: "muted", id: "trace-summary" })),
    el("div", { id: "trace-body", class: "trace-body" }));
}

export async function loadTrace(taskId) {
  try {
    const runs = await api("GET", `/api/board/tasks/${enc(taskId)}/trace`);
    shown = { task: taskId, runs };
    renderTrace();
  } catch (err) { /* the panel keeps what it has */ }
}

export function forgetTrace() { shown = null; }

let reloadTimer = null;
function reloadSoon() {
  if (reloadTimer || !shown) return;
  const task = shown.task;
  reloadTimer = setTimeout(() => { reloadTimer = null; if (shown && shown.task === task) loadTrace(task); }, 300);
}

// A run's new steps (or a stall) on the open task or one of its subtasks.
export function traceFrame(frame) {
  if (!shown || !frame.payload) return;
  if (frame.kind !== "run_step" && frame.kind !== "run_stalled") return;
  const run = shown.runs.find((r) => r.execution.id === frame.payload.execution_id);
  if (!run) {
    if (frame.task_id === shown.task || shown.runs.some((r) => r.task_id === frame.task_id)) reloadSoon();
    return;
  }
  if (frame.kind === "run_stalled") run.execution.stalled_at = frame.payload.stalled_at;
  for (const step of frame.payload.steps || []) {
    if (!run.steps.some((s) => s.seq === step.seq)) run.steps.push(step);
  }
  run.steps.sort((a, b) => a.seq - b.seq);
  renderTrace();
}

const time = (iso) => (iso ? Date.parse(iso) : NaN);

// Where a step sits on the run's time line: its own start, else just after the
// step before it (a stream that gives no times still reads in order).
function placed(run) {
  const start = time(run.execution.started_at);
  let cursor = start;
  return run.steps.map((step) => {
    const at = Number.isFinite(time(step.started_at)) ? time(step.started_at) : cursor;
    const end = at + (step.duration_ms || 0);
    cursor = Math.max(cursor, end);
    return { step, at, end };
  });
}

function renderTrace() {
  const section = $("#trace");
  if (!section || !shown) return;
  const { runs } = shown;
  section.hidden = runs.length === 0;
  if (!runs.length) return;
  const rows = runs.map((run) => ({ run, steps: placed(run) }));
  const t0 = Math.min(...rows.map((r) => time(r.run.execution.started_at)));
  const t1 = Math.max(...rows.flatMap((r) => [
    Number.isFinite(time(r.run.execution.finished_at)) ? time(r.run.execution.finished_at) : Date.now(),
    ...r.steps.map((s) => s.end)]));
  const total = Math.max(t1 - t0, 1);
  const failing = rows.reduce((n, r) => n + r.steps.filter((s) => s.step.status === "error").length, 0);
  const count = rows.reduce((n, r) => n + r.steps.length, 0);
  $("#trace-summary").textContent = `${runs.length} run${runs.length === 1 ? "" : "s"}, ${count} step${count === 1 ? "" : "s"}`
    + (failing ? `, ${failing} failed` : "")
    // A command's run takes well under a second: "0s" read as nothing having run.
    + (total < 1000 ? ` in ${Math.round(total)} ms` : ` over ${span(total / 1000)}`);
  $("#trace-body").replaceChildren(...rows.map(({ run, steps }) => runView(run, steps, t0, total)));
}

function runView(run, steps, t0, total) {
  const e = run.execution;
  const log = `/api/board/tasks/${enc(run.task_id)}/executions/${e.id}/log`;
  const who = run.role === "review" ? "critic" : `run #${run.run}`;
  const where = run.depth ? `${run.task_title} · ` : "";
  const stalled = e.stalled_at && e.status === "running";
  return el("div", { class: `trace-run${run.depth ? " trace-child" : ""}`, style: `--depth:${run.depth}`,
    "data-execution": e.id, "data-task": run.task_id },
    el("div", { class: "trace-run-head" },
      el("span", { class: "trace-run-name" }, `${where}${who} · attempt ${e.attempt} · ${e.agent_id}`),
      el("span", { class: `trace-run-status status-${e.status}` }, e.status),
      stalled ? el("span", { class: "trace-stalled", title: `no step, output or usage since ${e.stalled_at}` }, "stalled") : "",
      e.error_class ? el("span", { class: "muted" }, e.error_class) : "",
      el("a", { class: "trace-log", href: log, download: "" }, "log")),
    el("ol", { class: "trace-steps" }, steps.map(({ step, at, end }) => stepView(step, at, end, t0, total, log))));
}

function stepView(step, at, end, t0, total, log) {
  const failed = step.status === "error";
  const left = (100 * (at - t0)) / total;
  const width = Math.max((100 * (end - at)) / total, 0.6);
  const tokens = step.tokens_in || step.tokens_out ? ` · ${step.tokens_in || 0}→${step.tokens_out || 0} tokens` : "";
  const args = Object.keys(step.arguments || {}).length ? JSON.stringify(step.arguments) : "";
  const title = [`${step.kind} ${step.name} (${step.status})`,
    step.duration_ms !== null && step.duration_ms !== undefined ? `${step.duration_ms} ms` : "",
    args, step.detail].filter(Boolean).join("\n");
  return el("li", { class: `trace-step kind-${step.kind}${failed ? " failed" : ""}`, "data-seq": step.seq,
    "data-status": step.status },
    el("a", { class: "trace-step-link", href: log, download: "", title, "aria-label": `${step.kind} ${step.name}, ${failed ? "failed" : "ok"}: open the run's log` },
      el("span", { class: "trace-step-label" }, failed ? "✗ " : "", el("span", { class: "trace-kind" }, step.kind.replace("_", " ")), " ",
        el("span", { class: "trace-name" }, step.name), tokens),
      el("span", { class: "trace-lane", "aria-hidden": "true" },
        el("span", { class: "trace-bar", style: `left:${left.toFixed(2)}%;width:${width.toFixed(2)}%` }))));
}
