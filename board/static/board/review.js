// The review section of the detail panel: the task's diff against its base, its
// runs with their log tails, the verification evidence, and the review buttons.

import { el } from "./kit.js";

// A unified diff, one line per row, coloured by its first character.
function patchView(text) {
  return el("pre", { class: "patch" }, (text || "").split("\n").map((line) => {
    const kind = line.startsWith("+++") || line.startsWith("---") ? "meta"
      : line.startsWith("+") ? "add" : line.startsWith("-") ? "del"
      : line.startsWith("@@") ? "hunk" : line.startsWith("diff ") || line.startsWith("index ") ? "meta" : "";
    return el("span", { class: "ln " + kind }, line + "\n");
  }));
}

export function reviewView(task, data, { note, approve, requestChanges }) {
  const ws = data.workspace;
  const diff = data.diff;
  const stat = diff.stat;
  const box = el("section", { class: "review", "data-review-for": task.id });
  const idle = !ws && !data.executions.length && !data.verification;
  if (idle && task.status !== "in_review") return box;  // nothing to review yet
  box.append(el("h3", {}, "The work"));
  if (!ws) box.append(el("p", { class: "muted" }, "no worktree (the task runs in place)"));
  if (ws) {
    box.append(el("p", { class: "branch" },
      "branch ", el("code", {}, ws.branch), " on ", el("code", {}, ws.base_branch || "?"),
      ` from ${(ws.base_sha || "").slice(0, 12)}`,
      ws.landing && ws.landing.result === "conflict" ? el("span", { class: "pill blocked-by" }, "conflict") : ""));
  }
  if (ws) box.append(el("p", { class: "diffstat" }, `${stat.files_changed} file(s) changed, `,
    el("span", { class: "add" }, `+${stat.insertions}`), " ", el("span", { class: "del" }, `−${stat.deletions}`)));
  for (const file of diff.files) {
    box.append(el("details", { class: "file", open: "" },
      el("summary", {}, el("code", {}, file.path), ` +${file.insertions ?? "bin"} −${file.deletions ?? "bin"}`,
        file.truncated ? " (truncated)" : ""),
      patchView(file.patch)));
  }
  if (diff.next_offset !== null) box.append(el("p", { class: "muted" }, `… more files from offset ${diff.next_offset}`));
  const v = data.verification;
  box.append(el("h3", {}, "Verification"),
    el("p", { class: v && v.verdict ? "verdict-" + v.verdict : "" }, v && v.verdict ? v.verdict : "unverified"),
    v && v.evidence ? el("pre", { class: "evidence" }, v.evidence) : "");
  box.append(el("h3", {}, "Runs"),
    el("p", {}, `total: ${data.cost.tokens} tokens, ${data.cost.cents}¢`
      + (data.cost.tree_cents !== undefined && data.cost.tree_cents !== data.cost.cents
        ? `; with subtasks ${data.cost.tree_tokens} tokens, ${data.cost.tree_cents}¢` : "")),
    el("ol", { class: "runs" }, data.executions.map((x) => el("li", {},
      el("details", {},
        el("summary", {}, `#${x.attempt} ${x.agent_id} (${x.runtime || "?"}) ${x.status}${x.error_class ? " (" + x.error_class + ")" : ""} · ${x.tokens} tokens · ${x.cost_cents}¢ ${x.cost_status || ""}`),
        el("pre", { class: "log" }, x.log_tail || "(no output)"))))));
  if (task.status === "in_review") {
    box.append(el("div", { class: "review-actions" },
      el("button", { id: "approve-btn", type: "button", class: "btn ok", onclick: () => approve(task) }, "Approve and land…"),
      el("button", { id: "request-changes-btn", type: "button", class: "btn", onclick: () => requestChanges(task) }, "Request changes…")));
  }
  box.append(el("p", { id: "review-note", class: "review-note", "data-kind": note ? note.kind : "" },
    note ? note.text : ""));
  return box;
}
