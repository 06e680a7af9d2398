// The board's state module under node's own test runner (node --test): no DOM, no
// browser. Run by tests/board/test_board_state_js.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as S from "../../../board/static/board/state.js";

const config = {
  team: "default",
  statuses: ["backlog", "todo", "in_progress", "in_review", "done", "blocked", "cancelled"],
  terminal: ["done", "cancelled"],
  none_configured: "(none configured)",
};

function task(id, extra) {
  return {
    id, team: "default", title: `Task ${id}`, description: "", status: "todo", priority: 0,
    labels: [], revision: 1, created_at: `2026-01-01T00:00:0${id.length}Z`,
    updated_at: "2026-01-01T00:00:00Z", ...extra,
  };
}

function loaded(state, tasks) {
  for (const t of tasks) S.place(state, t, { fromPage: true });
  for (const status of state.order) state.columns[status].next = null;
  for (const status of state.order) state.columns[status].count = state.columns[status].ids.size;
}

test("a task goes to its status column, and a waiting approval to Needs approval first", () => {
  const state = S.createState(config);
  loaded(state, [task("a"), task("b", { approval: { state: "required" } })]);
  assert.deepEqual([...state.columns.todo.ids], ["a"]);
  assert.deepEqual([...state.columns.needs_approval.ids], ["b"]);
  assert.equal(state.order[0], S.NEEDS);
});

test("a live move keeps the totals: one out of the old column, one into the new", () => {
  const state = S.createState(config);
  loaded(state, [task("a"), task("b")]);
  const change = S.applyChange(state, task("a", { status: "in_progress", revision: 2 }),
    { kind: "claimed", seq: 10, prev_status: "todo" }, 0);
  assert.equal(state.columns.todo.count, 1);
  assert.equal(state.columns.in_progress.count, 1);
  assert.deepEqual(new Set(change.dirty), new Set(["todo", "in_progress"]));
  assert.equal(change.recount, false);
});

test("an older revision than the card's is ignored, the same one redraws only the detail", () => {
  const state = S.createState(config);
  loaded(state, [task("a", { revision: 3 })]);
  assert.deepEqual(S.applyChange(state, task("a", { revision: 2, status: "done" }), { kind: "x", seq: 1 }, 0), { ignore: true });
  assert.deepEqual(S.applyChange(state, task("a", { revision: 3 }), { kind: "x", seq: 1 }, 0), { same: true });
  assert.equal(state.tasks.get("a").status, "todo");
});

test("another team's task never lands on this board", () => {
  const state = S.createState(config);
  assert.deepEqual(S.applyChange(state, task("z", { team: "red" }), { kind: "added", seq: 1 }, 0), { ignore: true });
  assert.equal(state.tasks.size, 0);
});

test("a replayed frame asks the totals again", () => {
  const state = S.createState(config);
  loaded(state, []);
  const change = S.applyChange(state, task("n"), { kind: "added", seq: 5, prev_status: null }, 9);
  assert.equal(change.recount, true);
  assert.equal(state.columns.todo.count, 0);
});

test("filters hide what they do not match, live frames included", () => {
  const state = S.createState(config, S.readFilters("?label=auth&q=login"));
  assert.equal(S.filtersActive(state.filters), true);
  assert.equal(S.matches(task("a", { labels: ["auth"], title: "Fix login" }), state.filters), true);
  assert.equal(S.matches(task("b", { labels: ["auth"], title: "Docs" }), state.filters), false);
  assert.equal(S.place(state, task("b", { labels: ["auth"] }), { fromPage: true }).placed, undefined);
  assert.equal(S.filterQuery("default", state.filters).toString(), "team=default&dropped=false&q=login&label=auth");
});

test("a card past the loaded page waits for Load more", () => {
  const state = S.createState(config);
  S.place(state, task("hi", { priority: 5 }), { fromPage: true });
  state.columns.todo.next = "/api/next";
  assert.equal(S.place(state, task("lo", { priority: 1 }), {}).placed, false);
  assert.equal(S.place(state, task("top", { priority: 9 }), {}).placed, true);
});

test("a move on its way shows in its target until the answer", () => {
  const state = S.createState(config);
  loaded(state, [task("a")]);
  assert.deepEqual(S.startMove(state, state.tasks.get("a"), "blocked"), ["todo", "blocked"]);
  assert.equal(S.columnOf(state, state.tasks.get("a")), "blocked");
  assert.deepEqual(S.endMove(state, state.tasks.get("a")), ["blocked", "todo"]);
  assert.deepEqual([...state.columns.todo.ids], ["a"]);
});

test("blocked-by counts the dependencies not seen done", () => {
  const state = S.createState(config);
  loaded(state, [task("d1", { status: "done" }), task("d2"), task("a", { depends_on: ["d1", "d2", "d3"] })]);
  assert.equal(S.blockedBy(state, state.tasks.get("a")), 2);
  assert.equal(S.blockedBy(state, task("b", { depends_on: ["d2"], unmet_deps: 0 })), 0);
});

test("no verify command is said as such, not as a failed verification", () => {
  assert.equal(S.verdictBadge({ verdict: "fail", evidence: "(none configured)", gate: null }, "(none configured)").text, "no verify command");
  assert.equal(S.verdictBadge({ verdict: "fail", evidence: "1 failed", gate: { command: "pytest" } }, "(none configured)").text, "✗ verify failed");
  assert.equal(S.verdictBadge({ verdict: "pass" }, "(none configured)").text, "✓ verified");
  assert.equal(S.verdictBadge(null, "x"), null);
});

test("the Failed filter leaves out a task nothing verified; No verify command lists it", () => {
  const none = task("n", { verification: { verdict: "fail", evidence: "(none configured)", gate: null } });
  const red = task("r", { verification: { verdict: "fail", evidence: "1 failed", gate: { command: "pytest" } } });
  const fresh = task("f");
  const shown = (verdict) => [none, red, fresh].filter((t) => S.matches(t, { verdict })).map((t) => t.id);
  assert.deepEqual(shown("fail"), ["r"]);
  assert.deepEqual(shown("unconfigured"), ["n"]);
  assert.deepEqual(shown("none"), ["f"]);
});

test("feedback from a round that a later round passed is labelled with its round", () => {
  const passed = { verdict: "pass", attempts: [{ gate: {} }, { gate: {} }] };
  assert.equal(S.feedbackText({ feedback: "fix the crash", verification: passed }),
    "from round 1 (round 2 passed): fix the crash");
  assert.equal(S.feedbackText({ feedback: "fix the crash", verification: { verdict: "fail", attempts: [{}] } }), "fix the crash");
  assert.equal(S.feedbackText({ feedback: "" }), "—");
  // Sent back by a person after the pass: the feedback is theirs, not round 1's.
  assert.equal(S.feedbackText({ status: "in_progress", feedback: "add a docstring", verification: passed }),
    "add a docstring");
});

test("a task back in the queue after failed runs shows its attempts and last error", () => {
  const badge = S.attemptsBadge({ status: "todo", attempts: 2, max_attempts: 3, feedback: "exit 1" });
  assert.equal(badge.text, "↻ 2/3 attempts");
  assert.equal(badge.error, "exit 1");
  assert.equal(S.attemptsBadge({ status: "in_progress", attempts: 1, error: "x" }), null);
  assert.equal(S.attemptsBadge({ status: "todo", attempts: 0 }), null);
});

test("runs have one number: the API's run, found by execution id", () => {
  const runs = [{ id: 19, run: 2 }, { id: 7, run: 1 }];
  assert.equal(S.runNumber(runs, 19), 2);
  assert.equal(S.runNumber(runs, 99), null);
});

test("a run with no price says cost unknown, not 0¢; an estimate is marked", () => {
  assert.equal(S.runCost({ cost_cents: 0, cost_status: "unknown" }), "cost unknown");
  assert.equal(S.runCost({ cost_cents: 12, cost_status: "reported" }), "12¢");
  assert.equal(S.runCost({ cost_cents: 3, cost_status: "estimated" }), "3¢ (estimated)");
});

test("a review note stands while its task keeps the status it was said at", () => {
  const queued = { id: "a", text: "Queued to land: position 1", kind: "ok", status: "in_review" };
  assert.equal(S.noteStands(queued, { id: "a", status: "in_review" }), true);
  assert.equal(S.noteStands(queued, { id: "a", status: "done" }), false);
  assert.equal(S.noteStands(queued, { id: "b", status: "in_review" }), false);
  assert.equal(S.noteStands(null, { id: "a", status: "done" }), false);
});

test("routes read and compare as the editor needs", () => {
  assert.equal(S.routeText({ agent: "ada", runtime: "codex", labels: ["gpu", "ssd"] }), "agent ada · codex · gpu+ssd");
  assert.equal(S.routeBody("", "", " "), null);
  assert.deepEqual(S.routeBody("ada", "", "gpu, ssd"), { agent: "ada", runtime: null, labels: ["gpu", "ssd"] });
  assert.equal(S.sameRoute(null, { agent: null, runtime: null, labels: [] }), false);
});

test("the agents summary names who is not at work", () => {
  assert.equal(S.agentsSummary([{ state: "active" }, { state: "paused" }, { state: "unhealthy" }]), "1 paused, 1 unhealthy");
  assert.equal(S.agentsSummary([{ state: "active" }]), "");
});

test("an agent left to a remote host says where, and whether a worker is there", () => {
  const ago = (iso) => `ago(${iso})`;
  const on = (live, seen_at) => ({ state: "active", runs_on: { host: "gpu-1", live, seen_at } });
  assert.equal(S.agentHost({ state: "active", runs_on: null }, ago), "");
  assert.equal(S.agentHost(on(true, "t1"), ago), "runs on gpu-1");
  assert.equal(S.agentHost(on(false, "t0"), ago), "runs on gpu-1: its worker was last seen ago(t0)");
  assert.equal(S.agentHost(on(false, null), ago), "runs on gpu-1: no worker has connected");
  assert.equal(S.agentsSummary([on(true, "t1"), on(false, null), { state: "active" }]), "1 with no worker");
  assert.equal(S.agentsSummary([{ state: "paused", runs_on: { live: false } }]), "1 paused");
});

test("a todo card says why it waits when every agent that may take it is not at work", () => {
  const state = S.createState(config);
  const builder = { id: "builder", display_name: "Builder", runtime: "command", labels: ["gpu"], state: "active",
    runs_on: { host: "gpu-1", live: false, seen_at: null } };
  const other = { id: "other", display_name: "Other", runtime: "codex", labels: [], state: "active", runs_on: null };
  assert.equal(S.setAgents(state, [builder, other]), true);
  assert.equal(S.setAgents(state, [builder, other]), false);  // nothing a card says changed
  // Routed to the agent whose host has no worker: the card says so, the title says where.
  const routed = task("r", { route: { agent: "builder" } });
  assert.deepEqual(S.waitReason(state, routed), {
    text: "waits: Builder has no worker",
    title: "No agent that may take it is at work: Builder has no worker (runs on gpu-1: no worker has connected)",
  });
  // Routed by label to the same one agent: the same words.
  assert.equal(S.waitReason(state, task("l", { route: { labels: ["gpu"] } })).text, "waits: Builder has no worker");
  // Anyone may take it and another agent is at work: nothing holds it.
  assert.equal(S.waitReason(state, task("a")), null);
  // Not waiting in Todo (in progress, or waiting for a person's approval): no word.
  assert.equal(S.waitReason(state, task("p", { status: "in_progress", route: { agent: "builder" } })), null);
  assert.equal(S.waitReason(state, task("w", { route: { agent: "builder" }, approval: { state: "required" } })), null);
  // The other one paused too: a task anyone may take waits on both.
  S.setAgents(state, [builder, { ...other, state: "paused", state_reason: "paused from the board" }]);
  const both = S.waitReason(state, task("a"));
  assert.equal(both.text, "waits: none of its 2 agents is at work");
  assert.match(both.title, /Other is paused: paused from the board/);
  // Its worker back: the card's word goes (setAgents says a redraw is due).
  assert.equal(S.setAgents(state, [{ ...builder, runs_on: { host: "gpu-1", live: true, seen_at: "t" } }]), true);
  assert.equal(S.waitReason(state, routed), null);
});

test("a todo card says a paused cap budget over it holds it, as the header's chip does", () => {
  const state = S.createState(config);
  S.setAgents(state, [{ id: "builder", runtime: "command", labels: [], state: "active", runs_on: null }]);
  const cap = { id: "b1", scope: "agent", scope_id: "builder", window: "day", status: "paused", spent_cents: 120, limit_cents: 100 };
  assert.equal(S.setBudgets(state, [cap]), true);
  assert.equal(S.setBudgets(state, [{ ...cap, spent_cents: 130 }]), false);  // still the same caps paused
  const why = S.waitReason(state, task("r", { route: { agent: "builder" } }));
  assert.equal(why.text, "waits: agent budget paused");
  assert.match(why.title, /day cap of agent builder is spent \(130¢ of 100¢\)/);
  // Another team's cap, or one not paused, holds nothing here.
  S.setBudgets(state, [{ ...cap, scope: "team", scope_id: "elsewhere" }, { ...cap, id: "b2", status: "active" }]);
  assert.equal(S.waitReason(state, task("r", { route: { agent: "builder" } })), null);
  S.setBudgets(state, [{ ...cap, scope: "team", scope_id: "default" }]);
  assert.equal(S.waitReason(state, task("a")).text, "waits: team budget paused");
});

test("a task's scope reads in words, with why it waits for its paths", () => {
  const state = S.createState(config);
  const wait = { task: "t1", status: "in_progress", touches: "src/**", theirs: "src/**", detail: "waiting: touches src/** like task 't1' in progress" };
  assert.equal(S.setScopeWaits(state, { t2: wait }), true);
  assert.equal(S.setScopeWaits(state, { t2: wait }), false);  // nothing changed: no redraw
  assert.equal(S.scopeText(task("t2", { touches: ["src/**"], scope: ["src/**"] }), state.scopeWaits.get("t2")),
    "src/**; waiting: touches src/** like task 't1' in progress");
  assert.equal(S.scopeText(task("t3", { touches: null, scope: ["lib/a.py"] })), "lib/a.py (its last attempt's changes)");
  assert.equal(S.scopeText(task("t4", { touches: null, scope: null })), "— (never held back)");
  S.clearState(state);
  assert.equal(state.scopeWaits.size, 0);
});

test("a stalled run is noted from the columns' answer or a frame, and cleared with null", () => {
  const state = S.createState(config);
  S.noteStalled(state, "t1", 7, "2026-01-01T00:00:00Z");
  assert.deepEqual(state.stalled.get("t1"), { execution: 7, at: "2026-01-01T00:00:00Z" });
  S.noteStalled(state, "t1", null);
  assert.equal(state.stalled.has("t1"), false);
});

test("a task's cost names its subtasks only when they add, and runs with no price as such", () => {
  const cost = { tokens: 0, cents: 0, tree_tokens: 0, tree_cents: 0 };
  // It read "total: 0 tokens, 0¢" over runs each saying "cost unknown", and
  // "0 tokens, 0¢; with subtasks 0 tokens, 0¢" for a task with no subtasks.
  assert.equal(S.costText(cost), "0 tokens, 0¢");
  assert.equal(S.costText(cost, [{ cost_status: "unknown" }]), "0 tokens, cost unknown");
  assert.equal(S.costText({ ...cost, cents: 5, tree_cents: 5 }, [{ cost_status: "reported" }, { cost_status: "unknown" }]),
    "0 tokens, 5¢ (+ 1 run of unknown cost)");
  assert.equal(S.costText({ tokens: 10, cents: 12, tree_tokens: 30, tree_cents: 42 }),
    "10 tokens, 12¢; with subtasks 30 tokens, 42¢");
});

test("a routine's fire says its slot, so two fires of one routine tell apart", () => {
  const now = new Date(2030, 0, 7, 12, 0);
  const fire = (at) => ({ metadata: { routine_id: "r1", slot_at: at.getTime() } });
  assert.equal(S.routineFire(fire(new Date(2030, 0, 7, 9, 5)), now).text, "⟳ fired 09:05");
  assert.equal(S.routineFire(fire(new Date(2030, 0, 6, 23, 58)), now).text, "⟳ fired 2030-01-06 23:58");
  assert.match(S.routineFire(fire(new Date(2030, 0, 7, 9, 5)), now).title, /^routine r1's fire for /);
  assert.equal(S.routineFire({ metadata: { kind: "code" } }, now), null);
  assert.equal(S.routineFire({}, now), null);
});

test("a routine's fire names its routine, not its id, once the routines are read", () => {
  const now = new Date(2030, 0, 7, 12, 0);
  const fire = { metadata: { routine_id: "6cc3a7fa5ffab97f", slot_at: new Date(2030, 0, 7, 9, 5).getTime() } };
  const names = new Map([["6cc3a7fa5ffab97f", "Tidy the notes · */5 * * * * · 6cc3a7"]]);
  // It read "routine 6cc3a7fa5ffab97f's fire for …" whatever the routines said.
  assert.match(S.routineFire(fire, now, names).title, /^routine “Tidy the notes · \*\/5 \* \* \* \* · 6cc3a7”'s fire for /);
  assert.match(S.routineFire(fire, now, new Map()).title, /^routine 6cc3a7fa5ffab97f's fire for /);
  assert.equal(S.createState({ statuses: [] }).routineNames.size, 0);
});

test("approving lands by queue when the task's repository (or its path) lands by queue", () => {
  const st = S.createState({ statuses: [] });
  st.queueRepositories = new Set(["shop", "/repos/shop"]);
  assert.equal(S.landsByQueue(st, { worktree_ref: "/w/1", repository: "shop" }), true);
  assert.equal(S.landsByQueue(st, { worktree_ref: "/w/1", repository: null, metadata: { repo_path: "/repos/shop" } }), true);
  assert.equal(S.landsByQueue(st, { worktree_ref: "/w/1", repository: "app" }), false);
  assert.equal(S.landsByQueue(st, { worktree_ref: null, repository: "shop" }), false);
});

test("the routine filter keeps that routine's fires (the routines page links to it)", () => {
  const fire = (id, routine) => ({ id, metadata: { routine_id: routine, slot_at: 1 } });
  const tasks = [fire("a", "r1"), fire("b", "r2"), { id: "c", metadata: {} }, { id: "d" }];
  assert.deepEqual(tasks.filter((t) => S.matches(t, { routine: "r1" })).map((t) => t.id), ["a"]);
  assert.deepEqual(tasks.filter((t) => S.matches(t, { routine: "" })).map((t) => t.id), ["a", "b", "c", "d"]);
  assert.ok(S.FILTER_KEYS.includes("routine"));  // kept in the URL like the others
});

test("a waiting tool call shows whole: every field, however long, whatever comes first", () => {
  const content = "x".repeat(400);
  const write = S.toolCallText({ content, file_path: ".git/hooks/pre-commit" });
  assert.ok(write.includes(content) && write.includes(".git/hooks/pre-commit"));
  assert.equal(S.toolCallText({ command: "ls -la" }), "ls -la");
  const flagged = S.toolCallText({ command: "make test", dangerouslyDisableSandbox: true });
  assert.ok(flagged.startsWith("make test\n") && flagged.includes('"dangerouslyDisableSandbox": true'));
  assert.equal(S.toolCallText(null), "{}");
});

test("a task naming no repository lands by queue when its worktree's repository does", () => {
  // It works in its agent's default repository (the demo's shop): its body names none,
  // and the approve dialog said it landed at once where the queue took it.
  const st = S.createState({ statuses: [] });
  st.queueRepositories = new Set(["shop", "/repos/shop"]);
  const task = { id: "t1", worktree_ref: "/w/t1", repository: null, metadata: {} };
  assert.equal(S.landsByQueue(st, task), false);
  st.workspaceRepos.set("t1", "/repos/shop");
  assert.equal(S.landsByQueue(st, task), true);
  st.workspaceRepos.set("t1", "/repos/app");
  assert.equal(S.landsByQueue(st, task), false);
});

test("the detail's repository is the server's answer, and why when not the task's own", () => {
  // The panel named no repository: a task naming none works in its agent's default.
  const t = task("r1", { repository: null, assignee_agent_id: "far-bot" });
  assert.equal(S.runRepositoryText(t, null), "…");
  assert.equal(S.runRepositoryText({ ...t, repository: "app" }, null), "app");
  const where = { id: "app", remote: "/srv/app.git", base_branch: "main", source: "agent_default" };
  assert.equal(S.runRepositoryText(t, where), "app (its agent's default)");
  assert.equal(S.runRepositoryText(t, { ...where, source: "task" }), "app");
  const none = { id: null, remote: null, base_branch: "", source: "none" };
  assert.equal(S.runRepositoryText(t, none), "none (its run works in a scratch directory)");
  assert.equal(S.runRepositoryText({ ...t, assignee_agent_id: null }, none),
    "none named (the claiming agent's default, if it has one)");
});
