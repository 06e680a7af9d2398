// A task's card: its badges (route, labels, approval, verdict, attempts, error, cost,
// lease), the tool calls waiting on it and the approval buttons. Cards are cached by
// what they show, so a re-render of a column redraws only the cards that changed.
import { ago, bidiMarked, el, timed, initials, money, tokens } from "./kit.js";
import * as S from "./state.js";
import { config, label, state } from "./page.js";

const cardCache = new Map();      // id -> {key, node}
export const forgetCard = (id) => cardCache.delete(id);
export const forgetCards = () => cardCache.clear();

// A task's pull request on its forge (landing_mode pull_request): its number, a link,
// and what its checks say ("checks running" while the task waits in review).
export function pullRequestWords(pr) {
  const checks = (pr.checks || {}).state;
  if (pr.state === "merged") return ["ok", "merged"];
  if (pr.state === "closed") return ["bad", "closed"];
  if (checks === "pending") return ["warn", "checks running"];
  if (checks === "failure") return ["bad", "checks failed"];
  if (checks === "success") return ["ok", "checks passed"];
  return ["quiet", pr.draft ? "draft" : "open"];
}

function pullRequestBadge(pr) {
  if (!pr || !pr.number) return null;
  const [kind, word] = pullRequestWords(pr);
  return el("a", { class: `badge ${kind} pull-request`, href: pr.url, target: "_blank", rel: "noopener",
    title: `pull request #${pr.number}${pr.draft ? " (draft)" : ""} on ${pr.base || "?"}` },
  `PR #${pr.number} · ${word}`);
}

export function badges(task) {
  const out = [];
  const status = task.status;
  if (task.route) {
    out.push(el("span", { class: "pill route", title: "routed to " + S.routeText(task.route) }, "→ " + S.routeText(task.route)));
  }
  const fire = S.routineFire(task, new Date(), state.routineNames);
  if (fire) out.push(el("span", { class: "pill routine-fire", title: fire.title }, fire.text));
  for (const name of task.labels || []) {
    out.push(el("span", { class: "pill label", "data-label": name, title: `label ${name}` }, name));
  }
  const a = task.approval;
  if (a && a.state === "denied") {
    out.push(el("span", { class: "badge bad approval", title: `denied by ${a.by}${a.reason ? ": " + a.reason : ""}` }, "✗ approval denied"));
  } else if (a && a.state === "expired") {
    out.push(el("span", { class: "badge warn approval", title: "nobody answered in time; still waiting for a person" }, "⌛ approval expired"));
  } else if (a && a.state === "required") {
    out.push(el("span", { class: "badge warn approval", title: a.reason || "waits for a person's approval before any agent takes it" }, "needs approval"));
  } else if (a && a.state === "approved") {
    out.push(el("span", { class: "badge ok approval", title: `approved by ${a.by} (revision ${a.revision})` }, "✓ approved"));
  }
  const held = status === "todo" ? state.scopeWaits.get(task.id) : null;
  if (held) {
    out.push(el("span", { class: "pill scope-wait", title: held.detail }, held.detail));
  }
  // Its agents not at work, or a paused cap over it: what the header says, on the card.
  const away = S.waitReason(state, task, ago);
  if (away) out.push(el("span", { class: "pill agent-wait", title: away.title }, away.text));
  const waits = S.blockedBy(state, task);
  if (waits) out.push(el("span", { class: "pill blocked-by", title: "dependencies not done" }, `blocked by ${waits}`));
  const verdict = S.verdictBadge(task.verification, state.noneConfigured);
  if (verdict) out.push(el("span", { class: `badge ${verdict.kind} verdict`, title: verdict.title }, verdict.text));
  const pr = pullRequestBadge(task.pull_request);
  if (pr) out.push(pr);
  const tries = S.attemptsBadge(task);
  if (tries) out.push(el("span", { class: "badge warn attempts", title: tries.title }, tries.text));
  const error = task.error || (tries ? tries.error : "");
  if (error && status !== "done") {
    out.push(el("span", { class: "badge bad error", title: error }, "⚠ " + (error.length > 28 ? error.slice(0, 27) + "…" : error)));
  }
  const cost = task.cost || {};
  if (cost.cents || cost.tokens || cost.tree_cents) {
    // The tree's figure when subtasks spent too: "12¢ (tree 40¢)".
    const tree = cost.tree_cents && cost.tree_cents !== cost.cents ? ` (tree ${money(cost.tree_cents)})` : "";
    const ceiling = task.max_run_cents ? `; ceiling ${task.max_run_cents}¢ a run` : "";
    out.push(el("span", { class: "badge quiet cost", title: `${cost.tokens || 0} tokens, ${cost.cents || 0}¢; tree ${cost.tree_tokens || 0} tokens, ${cost.tree_cents || 0}¢${ceiling}` },
      [cost.cents ? money(cost.cents) + tree : tree.trim() || null, cost.tokens ? `${tokens(cost.tokens)} tok` : null].filter(Boolean).join(" · ")));
  }
  const stalled = status === "in_progress" && state.stalled.get(task.id);
  if (stalled) {
    out.push(el("span", { class: "badge warn stalled", title: `its run said nothing (no step, output or usage) since ${new Date(stalled.at).toLocaleString()}` }, "stalled"));
  }
  if (status === "in_progress" && task.lease_until) {
    // The last beat (or the claim) set lease_until = then + lease_duration_ms.
    const beat = task.lease_duration_ms
      ? new Date(Date.parse(task.lease_until) - task.lease_duration_ms).toISOString() : task.updated_at;
    out.push(timed("span", "badge quiet beat", "beat", beat, "last heartbeat"));
    out.push(timed("span", "badge quiet lease", "lease", task.lease_until, "lease until " + new Date(task.lease_until).toLocaleString()));
  }
  if (task.assignee_agent_id) {
    out.push(el("span", { class: "assignee", title: `assignee ${task.assignee_agent_id}${task.assignee_runtime ? " (" + task.assignee_runtime + ")" : ""}` },
      el("span", { class: "avatar" }, initials(task.assignee_agent_id)), task.assignee_agent_id));
  }
  return out;
}

function toolAskNodes(task) {
  const mine = state.toolAsks.get(task.id);
  if (!mine) return null;
  return [...mine.values()].map((ask) => el("div", { class: "tool-ask", "data-tool-approval": ask.id },
    el("div", { class: "tool-ask-what" }, el("strong", {}, `${ask.agent_id} wants to run ${ask.tool}`),
      el("code", { class: "tool-ask-args" }, S.toolCallText(ask.arguments))),
    el("div", { class: "approval-actions" },
      el("button", { type: "button", class: "btn primary small", "data-tool-decision": "allow_once" }, "Allow once"),
      el("button", { type: "button", class: "btn ghost small", "data-tool-decision": "allow_always", title: `Always let ${ask.agent_id} run ${ask.tool}` }, "Always"),
      el("button", { type: "button", class: "btn ghost small", "data-tool-decision": "deny" }, "Deny"))));
}

export function cardNode(task) {
  const shownAs = S.statusOf(state, task);
  const asks = state.toolAsks.get(task.id);
  const key = [task.revision, shownAs, state.routineNames.get((task.metadata || {}).routine_id) || "", task.id === state.selected, S.blockedBy(state, task), (state.scopeWaits.get(task.id) || {}).detail || "", state.pending.has(task.id), asks ? [...asks.keys()].join(",") : "", state.stalled.has(task.id), (S.waitReason(state, task) || {}).text || ""].join("|");
  const cached = cardCache.get(task.id);
  if (cached && cached.key === key) return cached.node;
  const node = el("article", {
    class: "card" + (task.id === state.selected ? " selected" : "") + (state.pending.has(task.id) ? " pending" : ""),
    "data-task-id": task.id, tabindex: "0", draggable: "true",
    "aria-label": `${task.title} (${label(shownAs)})`,
  },
    el("div", { class: "top-line" },
      el("span", { class: "prio" + (task.priority > 0 ? " hi" : ""), title: "priority" }, "P" + task.priority),
      el("span", { class: "id", title: task.id }, task.id),
      task.status === "done" && task.completed_at ? timed("span", "when", "ago", task.completed_at, "done") : null),
    el("div", { class: "title" }, bidiMarked(task.title)),
    el("div", { class: "meta" }, badges(task)),
    toolAskNodes(task),
    S.waiting(task) ? el("div", { class: "approval-actions" },
      el("button", { type: "button", class: "btn primary small", "data-approval": "approve", title: "Approve: agents may take it" }, "Approve"),
      el("button", { type: "button", class: "btn ghost small", "data-approval": "deny", title: "Deny: no agent takes it" }, "Deny")) : null);
  cardCache.set(task.id, { key, node });
  return node;
}
