// A run's output, live: the newest execution's log streamed over the socket into the
// open task's detail, numbered as its runs list numbers it (the API's ``run``).
import { $, api } from "./kit.js";
import { runNumber } from "./state.js";
import { live } from "./page.js";

const enc = encodeURIComponent;

const LOG_LINES = 2000;             // the panel keeps the last lines; the download has all
let watched = null;                 // {task, execution, offset, text}
let runs = { task: null, list: [], asking: false };   // the watched task's runs, numbered

// The run's number comes from the task's runs (GET …/executions), asked again
// when a run the panel does not know yet starts streaming.
async function numberRuns(taskId) {
  if (runs.asking) return;
  runs.asking = true;
  try {
    const list = await api("GET", `/api/board/tasks/${enc(taskId)}/executions`);
    runs = { task: taskId, list, asking: false };
    if (watched && watched.task === taskId && runNumber(list, watched.execution) !== null) showOutput();
  } catch (err) {
    runs.asking = false;
  }
}

// The server follows the task's newest run from its log files, so the first line
// shows the moment it is printed, whenever the claim's event reaches this page.
export function watchOutput(task) {
  if (watched && watched.task === task.id) { showOutput(); return; }
  watched = { task: task.id, execution: null, offset: 0, text: "" };
  sendWatch();
}

export function sendWatch() {
  if (!watched || !live.socket || live.socket.readyState !== WebSocket.OPEN) return;
  const frame = { type: "watch-log", task: watched.task };
  if (watched.execution !== null) { frame.execution = watched.execution; frame.offset = watched.offset; }
  live.socket.send(JSON.stringify(frame));
}

export function unwatchOutput() {
  if (!watched) return;
  watched = null;
  if (live.socket && live.socket.readyState === WebSocket.OPEN) live.socket.send(JSON.stringify({ type: "unwatch-log" }));
}

export function logFrame(frame) {
  if (!watched || frame.task !== watched.task) return;
  if (frame.execution !== watched.execution) {
    if (frame.offset !== 0 && !frame.skipped) return;   // a stale stream's frame
    watched.execution = frame.execution;                // a newer run: start over
    watched.offset = 0;
    watched.text = "";
  }
  let text = watched.text;
  if (frame.skipped) {
    text += `[… ${frame.skipped} bytes skipped: download the full log]\n`;
    watched.offset = frame.offset;
  }
  if (frame.text !== undefined) {
    if (frame.offset !== watched.offset) return;
    watched.offset += new TextEncoder().encode(frame.text).length;
    text += frame.text;
  }
  const lines = text.split("\n");
  if (lines.length > LOG_LINES + 1) text = lines.slice(-LOG_LINES - 1).join("\n");
  watched.text = text;
  showOutput();
}

function showOutput() {
  const section = $("#run-output");
  if (!section || !watched || watched.execution === null) return;
  section.hidden = false;
  const run = runNumber(runs.list, watched.execution);
  $("#run-output-state").textContent = run === null ? "" : `run #${run}`;
  if (run === null) numberRuns(watched.task);
  $("#run-log-download").href = `/api/board/tasks/${enc(watched.task)}/executions/${watched.execution}/log`;
  const pre = $("#run-log");
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.textContent = watched.text;
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}
