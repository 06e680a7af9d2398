// The review section of the detail panel: the task's diff against its base (with the
// critic's findings and a person's line comments at their lines), its runs with their
// log tails, the structured verdict, and the review buttons.

import { bidiMarked, el } from "./kit.js";
import { pullRequestWords } from "./cards.js";
import { costText, landsByQueue, runCost } from "./state.js";
import { state } from "./page.js";

// Severities that block the change (board.judgement.BLOCKING_SEVERITIES).
const BLOCKING = new Set(["security", "crash", "data_loss", "wrong_algorithm", "missing_ac"]);

// A person's line comments not sent yet, per task: kept across re-renders of the
// panel, sent by "Request changes" (like a pull request's pending review).
const drafts = new Map();
export const draftsFor = (taskId) => drafts.get(taskId) || [];
export const clearDrafts = (taskId) => drafts.delete(taskId);

function findingView(f) {
  const where = f.file ? `${f.file}${f.line ? ":" + f.line : ""}` : "";
  return el("div", {
    class: "finding sev-" + f.severity + (BLOCKING.has(f.severity) ? " blocking" : ""),
    "data-file": f.file || "", "data-line": f.line || "",
  }, el("b", { class: "sev" }, f.severity), " ", el("span", { class: "title" }, f.title),
  where ? el("code", { class: "where" }, where) : "",
  f.body ? el("div", { class: "body" }, f.body) : "");
}

function commentView(taskId, c) {
  return el("div", { class: "line-comment", "data-file": c.file, "data-line": c.line },
    el("b", {}, "you"), " ", el("span", { class: "body" }, c.body),
    el("button", { type: "button", class: "btn link", title: "Drop this comment", onclick: (e) => {
      drafts.set(taskId, draftsFor(taskId).filter((d) => d !== c));
      e.target.closest(".line-comment").remove();
    } }, "×"));
}

// The inline form under a line: its comment joins the drafts and shows at the line.
function openCommentForm(taskId, file, line, row) {
  const next = row.nextElementSibling;
  if (next && next.classList.contains("comment-form")) { next.querySelector("textarea").focus(); return; }
  const text = el("textarea", { rows: "2", class: "comment-text", "aria-label": `Comment on ${file}:${line}` });
  const form = el("div", { class: "comment-form", "data-file": file, "data-line": line }, text,
    el("button", { type: "button", class: "btn ok comment-add", onclick: () => {
      const body = text.value.trim();
      if (!body) { text.focus(); return; }
      const c = { file, line, body };
      drafts.set(taskId, [...draftsFor(taskId), c]);
      form.replaceWith(commentView(taskId, c));
    } }, "Add comment"),
    el("button", { type: "button", class: "btn", onclick: () => form.remove() }, "Cancel"));
  row.after(form);
  text.focus();
}

// A unified diff, one line per row, coloured by its first character; each line of
// the new side carries its number, the findings about it and the comments on it.
function patchView(taskId, file, text, findings) {
  const box = el("div", { class: "patch", "data-file": file });
  let line = 0;
  for (const raw of (text || "").split("\n")) {
    const kind = raw.startsWith("+++") || raw.startsWith("---") ? "meta"
      : raw.startsWith("+") ? "add" : raw.startsWith("-") ? "del"
      : raw.startsWith("@@") ? "hunk" : raw.startsWith("diff ") || raw.startsWith("index ") ? "meta" : "";
    let number = null;
    if (kind === "hunk") {
      const m = raw.match(/^@@ -\d+(?:,\d+)? \+(\d+)/);
      line = m ? parseInt(m[1], 10) : line;
    } else if (kind === "add" || (kind === "" && raw.startsWith(" "))) {
      number = line++;
    }
    const row = el("span", { class: "ln " + kind, "data-line": number ?? "" },
      number === null ? el("span", { class: "gutter" }, "")
        : el("button", { type: "button", class: "gutter", title: `Comment on line ${number}`,
            onclick: (e) => openCommentForm(taskId, file, number, e.target.closest(".ln")) }, String(number)),
      bidiMarked(raw), "\n");
    box.append(row);
    if (number === null) continue;
    for (const f of findings.filter((f) => f.file === file && f.line === number)) box.append(findingView(f));
    for (const c of draftsFor(taskId).filter((c) => c.file === file && c.line === number)) box.append(commentView(taskId, c));
  }
  return box;
}

function verificationView(v) {
  const out = [el("h3", {}, "Verification"),
    el("p", { class: v && v.verdict ? "verdict-" + v.verdict : "" }, v && v.verdict ? v.verdict : "unverified")];
  if (!v) return out;
  const g = v.gate;
  out.push(el("p", { class: "gate" }, g
    ? [el("code", {}, g.command || "?"), ` exit ${g.exit_code ?? "—"} in ${g.duration_ms} ms`, g.timed_out ? " (timed out)" : ""]
    : "no verify command configured"));
  if (v.reviewer) out.push(el("p", { class: "reviewer" }, `reviewed by ${v.reviewer.agent} (${v.reviewer.runtime}${v.reviewer.model ? ", " + v.reviewer.model : ""})`));
  if (v.findings && v.findings.length) out.push(el("div", { class: "findings" }, v.findings.map(findingView)));
  if (v.attempts && v.attempts.length > 1) out.push(el("p", { class: "muted attempts" }, `${v.attempts.length} rounds`));
  if (v.evidence) out.push(el("pre", { class: "evidence" }, v.evidence));
  return out;
}

function pullRequestView(pr) {
  if (!pr || !pr.number) return [];
  const [kind, word] = pullRequestWords(pr);
  const runs = (pr.checks && pr.checks.runs) || [];
  return [el("h3", {}, "Pull request"),
    el("p", { class: "pull-request" },
      el("a", { href: pr.url, target: "_blank", rel: "noopener" }, `#${pr.number}`),
      ` ${pr.branch || ""} → ${pr.base || "?"} `,
      el("span", { class: `badge ${kind}` }, word),
      pr.draft ? el("span", { class: "badge quiet" }, "draft") : "",
      pr.fix_rounds ? el("span", { class: "muted" }, ` ${pr.fix_rounds} fix round(s) for checks`) : ""),
    runs.length ? el("ul", { class: "checks" }, runs.map((c) => el("li", { class: "check-" + c.state },
      c.url ? el("a", { href: c.url, target: "_blank", rel: "noopener" }, c.name) : c.name,
      ` — ${c.conclusion || c.state}`))) : el("p", { class: "muted" }, "no checks reported yet")];
}

export function reviewView(task, data, { note, approve, requestChanges }) {
  const ws = data.workspace;
  const diff = data.diff;
  const stat = diff.stat;
  const box = el("section", { class: "review", "data-review-for": task.id });
  const idle = !ws && !data.executions.length && !data.verification;
  const findings = (data.verification && data.verification.findings) || [];
  if (idle && task.status !== "in_review") return box;  // nothing to review yet
  box.append(el("h3", {}, "The work"));
  if (!ws) box.append(el("p", { class: "muted" }, "no worktree (the task runs in place)"));
  if (ws) {
    box.append(el("p", { class: "branch" },
      "branch ", el("code", {}, ws.branch), " on ", el("code", {}, ws.base_branch || "?"),
      ` from ${(ws.base_sha || "").slice(0, 12)}`,
      ws.landing && ws.landing.result === "conflict" ? el("span", { class: "pill blocked-by" }, "conflict") : ""));
    // A done task's work read like one still on its branch: say where it landed.
    if (ws.landing && ws.landing.result === "landed" && ws.landing.commit) {
      box.append(el("p", { class: "landed" }, "landed as ", el("code", {}, ws.landing.commit.slice(0, 12)),
        ` on ${ws.landing.base_branch || ws.base_branch || "?"}`, ws.landing.by ? ` (approved by ${ws.landing.by})` : ""));
    }
  }
  if (ws) box.append(el("p", { class: "diffstat" }, `${stat.files_changed} file(s) changed, `,
    el("span", { class: "add" }, `+${stat.insertions}`), " ", el("span", { class: "del" }, `−${stat.deletions}`)));
  for (const file of diff.files) {
    box.append(el("details", { class: "file", open: "" },
      el("summary", {}, el("code", {}, file.path), ` +${file.insertions ?? "bin"} −${file.deletions ?? "bin"}`,
        file.truncated ? " (truncated)" : ""),
      patchView(task.id, file.path, file.patch, findings)));
  }
  if (diff.next_offset !== null) box.append(el("p", { class: "muted" }, `… more files from offset ${diff.next_offset}`));
  box.append(...verificationView(data.verification));
  box.append(...pullRequestView(task.pull_request));
  box.append(el("h3", {}, "Runs"),
    el("p", { class: "runs-total" }, `total: ${costText(data.cost, data.executions)}`),
    el("ol", { class: "runs" }, data.executions.map((x) => el("li", {},
      el("details", {},
        el("summary", {}, `#${x.run} ${x.agent_id} (${x.runtime || "?"}) ${x.status}${x.error_class ? " (" + x.error_class + ")" : ""} · ${x.tokens} tokens · ${runCost(x)}`),
        el("pre", { class: "log" }, x.log_tail || "(no output)"))))));
  if (task.status === "in_review") {
    box.append(el("div", { class: "review-actions" },
      el("button", { id: "approve-btn", type: "button", class: "btn ok", onclick: () => approve(task) },
        landsByQueue(state, task) ? "Approve and queue…" : "Approve and land…"),
      el("button", { id: "request-changes-btn", type: "button", class: "btn", onclick: () => requestChanges(task) }, "Request changes…")));
  }
  box.append(el("p", { id: "review-note", class: "review-note", "data-kind": note ? note.kind : "" },
    note ? note.text : ""));
  return box;
}
