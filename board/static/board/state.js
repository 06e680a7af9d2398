// The board's state and the rules that change it, with no DOM: which column a task
// belongs in, whether a filtered board shows it, where a card goes among the loaded
// ones, how a live frame moves the column totals, and the words a card or the detail
// shows for a task. The page (board.js) renders what this decides; tests run it
// under node (tests/board/test_board_state_js.py).

// Tasks waiting for a person's approval sit in a column of their own, first, which
// is hidden while it is empty (GOVERNANCE §5); their status columns leave them out.
export const NEEDS = "needs_approval";
export const FILTER_KEYS = ["q", "label", "assignee", "verdict", "routine"];
const WAITING_STATES = new Set(["required", "expired"]);
const OPEN_STATUSES = new Set(["backlog", "todo", "blocked"]);

// The board of one team: the loaded tasks, each column's ids and totals, the moves
// on their way and the filters. ``config`` is the page's board-config.
export function createState(config, filters) {
  const statuses = config.statuses;
  const order = [NEEDS, ...statuses];
  const columns = {};
  for (const status of order) {
    columns[status] = {
      status,
      ids: new Set(),     // ids of the cards this column holds
      count: null,        // the server's total (kept current by live frames)
      next: undefined,    // undefined: not loaded yet; null: nothing more; else the next page
      loading: false,
    };
  }
  return {
    team: config.team,
    statuses,
    order,
    terminal: new Set(config.terminal || ["done", "cancelled"]),
    noneConfigured: config.none_configured || "(none configured)",
    columns,
    tasks: new Map(),     // id -> task body, for every card loaded
    doneIds: new Set(),   // tasks seen done (a dependency that no longer blocks)
    pending: new Map(),   // id -> status a move is on its way to
    toolAsks: new Map(),  // task id -> Map(approval id -> a tool call waiting for a person)
    scopeWaits: new Map(),  // task id -> {task, status, touches, theirs, detail}: waits for its paths
    stalled: new Map(),   // task id -> {execution, at}: its running run said nothing for a while
    filters: filters || emptyFilters(),
    selected: null,
    routineNames: new Map(),  // routine id -> its name, as GET /api/routines says it
    queueRepositories: new Set(),  // ids and paths of the team's repositories that land by queue
    // task id -> the repository path its worktree is of (its review's workspace): a task
    // naming no repository works in its agent's default one, which its body does not say.
    workspaceRepos: new Map(),
    agents: new Map(),    // agent id -> the team's agent, as the header's Agents last read it
    budgets: [],          // the team's budgets, as the header's spend last read them
  };
}

// Forget every loaded card (a full reload); the filters and selection stay.
export function clearState(state) {
  state.tasks.clear();
  state.pending.clear();
  state.toolAsks.clear();
  state.scopeWaits.clear();
  state.stalled.clear();
  for (const status of state.order) {
    const col = state.columns[status];
    col.ids.clear();
    col.count = null;
    col.next = undefined;
    col.loading = false;
  }
}

// --- filters (kept in the URL) ----------------------------------------------------

export function emptyFilters() {
  return Object.fromEntries(FILTER_KEYS.map((k) => [k, ""]));
}

export function readFilters(search) {
  const params = new URLSearchParams(search);
  const out = {};
  for (const key of FILTER_KEYS) out[key] = (params.get(key) || "").trim();
  return out;
}

export function filtersActive(filters) { return FILTER_KEYS.some((k) => filters[k]); }

export function filtersDiffer(a, b) {
  return FILTER_KEYS.some((k) => (a[k] || "").trim() !== (b[k] || ""));
}

export function filterQuery(team, filters) {
  const params = new URLSearchParams({ team, dropped: "false" });
  for (const key of FILTER_KEYS) if (filters[key]) params.set(key, filters[key]);
  return params;
}

// The verification filter's word for a task (board.store.verdict_filter): "none"
// for no verdict, "unconfigured" for a fail because no verify command was set up
// (not among "fail"), else the verdict.
export function verdictWord(v, noneConfigured) {
  if (!v || !v.verdict) return "none";
  return unverified(v, noneConfigured) ? "unconfigured" : v.verdict;
}

// The same rule as the server's filters (board.store.list_tasks), for live frames.
export function matches(task, filters, noneConfigured = "(none configured)") {
  if (task.dropped) return false;
  if (filters.label && !(task.labels || []).includes(filters.label)) return false;
  if (filters.assignee && task.assignee_agent_id !== filters.assignee) return false;
  if (filters.verdict) {
    if (verdictWord(task.verification, noneConfigured) !== filters.verdict) return false;
  }
  if (filters.routine && (task.metadata || {}).routine_id !== filters.routine) return false;
  if (filters.q) {
    const q = filters.q.toLowerCase();
    const hit = (task.title || "").toLowerCase().includes(q) ||
      (task.description || "").toLowerCase().includes(q) || task.id === filters.q;
    if (!hit) return false;
  }
  return true;
}

// --- columns ---------------------------------------------------------------------

// The same rule as the server's (board.store.approvals.awaiting_filter).
export const waiting = (task) => Boolean(task.approval && WAITING_STATES.has(task.approval.state) && OPEN_STATUSES.has(task.status));
// The column a task belongs in (its home), and the one its card shows in now (a
// move may be on its way).
export const homeOf = (task) => (waiting(task) ? NEEDS : task.status);
export const statusOf = (state, task) => state.pending.get(task.id) || task.status;
export const columnOf = (state, task) => state.pending.get(task.id) || homeOf(task);

// The column's order, as the server pages it: live columns priority first, then
// newest; terminal columns most recently changed first.
export function compare(state, status, a, b) {
  if (state.terminal.has(status)) {
    return a.updated_at === b.updated_at ? (a.id < b.id ? 1 : -1) : (a.updated_at < b.updated_at ? 1 : -1);
  }
  if (a.priority !== b.priority) return b.priority - a.priority;
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.id < b.id ? -1 : 1;
}

// The loaded tasks of a column, in its order.
export function columnTasks(state, status) {
  return [...state.columns[status].ids].map((id) => state.tasks.get(id)).filter(Boolean)
    .sort((a, b) => compare(state, status, a, b));
}

// Whether a card belongs among the loaded ones: every card does once the column is
// complete; otherwise only one that sorts before the last loaded card (the rest
// arrive with "load more", in order).
export function fits(state, col, task) {
  if (col.next === null) return true;
  if (col.next === undefined) return false;
  let last = null;
  for (const id of col.ids) {
    const other = state.tasks.get(id);
    if (other && (last === null || compare(state, col.status, other, last) > 0)) last = other;
  }
  return last === null || compare(state, col.status, task, last) < 0;
}

// Put a task where it belongs (or take it off the board when it no longer matches).
export function place(state, task, how) {
  const { tasks, columns } = state;
  const old = tasks.get(task.id);
  if (old && old.revision > task.revision) return { stale: true };
  if (task.status === "done") state.doneIds.add(task.id);
  if (state.doneIds.size > 50000) state.doneIds.delete(state.doneIds.values().next().value);
  const fromStatus = old ? columnOf(state, old) : null;
  if (old) {
    columns[fromStatus] && columns[fromStatus].ids.delete(task.id);
    tasks.delete(task.id);
  }
  const col = columns[homeOf(task)];
  if (!col || !matches(task, state.filters, state.noneConfigured)) return { removedFrom: fromStatus };
  if (how.fromPage || old || fits(state, col, task)) {
    tasks.set(task.id, task);
    col.ids.add(task.id);
  }
  return { removedFrom: fromStatus, placed: col.ids.has(task.id) };
}

function touchedDependents(state, task) {
  const out = new Set();
  if (task.status !== "done") return out;
  for (const other of state.tasks.values()) {
    if ((other.depends_on || []).includes(task.id)) out.add(columnOf(state, other));
  }
  return out;
}

// A task-change frame (or our own write's answer): place the card and keep the
// totals. The answer says what to draw again: ``ignore`` (not this board's, or
// older than what we hold), ``same`` (nothing moved: only the detail), else the
// ``dirty`` columns and whether the totals must be asked again (``recount``).
// ``helloSeq``: frames up to it may already be in what was loaded.
export function applyChange(state, task, frame, helloSeq) {
  const { tasks, columns } = state;
  if (task.team !== state.team) return { ignore: true };
  const old = tasks.get(task.id);
  if (old && old.revision >= task.revision && !frame) return { ignore: true };
  if (old && old.revision > task.revision) return { ignore: true };
  const wasSame = old && old.revision === task.revision;
  const shownIn = old ? columnOf(state, old) : null;   // where its card is (a move may be on its way)
  const before = old ? homeOf(old) : null;             // where the counts have it
  const home = homeOf(task);
  const result = place(state, task, {});
  if (result.stale || wasSame) return { same: true };
  const kind = frame && frame.kind;
  const replayed = Boolean(frame && frame.seq <= helloSeq);
  const prev = frame && frame.prev_status !== undefined ? (frame.prev_status || task.status) : null;
  const now = matches(task, state.filters, state.noneConfigured);
  let recount = false;
  // The counts: exact when we held the card (it matched) or it is new; otherwise we
  // cannot know whether the old version matched the filters, so ask again.
  if (old) {
    if (columns[before] && columns[before].count !== null) columns[before].count -= 1;
    if (now && columns[home].count !== null) columns[home].count += 1;
  } else if (kind === "added" && !replayed) {
    if (now && columns[home].count !== null) columns[home].count += 1;
  } else if (kind && kind.startsWith("approval")) {
    recount = true;  // it changed columns without changing status: we cannot know from where
  } else if (frame && !filtersActive(state.filters) && !replayed && prev) {
    if (prev !== task.status) {
      if (columns[prev] && columns[prev].count !== null) columns[prev].count = Math.max(0, columns[prev].count - 1);
      if (now && columns[task.status].count !== null) columns[task.status].count += 1;
    }
  } else {
    recount = true;
  }
  // A replayed change may already be in the totals we read: ask them again.
  if (replayed) recount = true;
  const dirty = new Set([home, ...touchedDependents(state, task)]);
  if (shownIn) dirty.add(shownIn);
  if (prev && columns[prev]) dirty.add(prev);
  return { dirty: [...dirty].filter((s) => columns[s]), recount };
}

// A move on its way: the card shows in its target column until the answer comes.
export function startMove(state, task, to) {
  const from = columnOf(state, task);
  state.pending.set(task.id, to);
  state.columns[from].ids.delete(task.id);
  state.columns[to].ids.add(task.id);
  return [from, to];
}

// The move answered (either way): the card goes back to where its body says.
export function endMove(state, task) {
  const to = state.pending.get(task.id);
  if (to === undefined) return [];
  state.pending.delete(task.id);
  const current = state.tasks.get(task.id);
  state.columns[to].ids.delete(task.id);
  const dirty = [to];
  if (current && state.columns[homeOf(current)]) {
    state.columns[homeOf(current)].ids.add(task.id);
    dirty.push(homeOf(current));
  }
  return dirty;
}

// A tool call asked or answered (GET /api/approvals, live frames).
export function noteToolAsk(state, ask) {
  const mine = state.toolAsks.get(ask.task_id) || new Map();
  if (ask.state === "pending") mine.set(ask.id, ask); else mine.delete(ask.id);
  if (mine.size) state.toolAsks.set(ask.task_id, mine); else state.toolAsks.delete(ask.task_id);
}

// --- what a card and the detail say ------------------------------------------------

// A waiting tool call as a person reads it before allowing it: the whole of it (the
// box scrolls). A shell command reads as itself, and any other field of the call
// follows it; a call was cut at 300 characters, and its agent chose what came first
// (a file's content before the path it writes, a command before its other flags).
export function toolCallText(args) {
  const { command, ...rest } = args || {};
  if (typeof command !== "string") return JSON.stringify(args || {}, null, 2);
  return Object.keys(rest).length ? `${command}\n${JSON.stringify(rest, null, 2)}` : command;
}

// How many of a task's dependencies are not done.
export function blockedBy(state, task) {
  if (state.terminal.has(task.status) || !(task.depends_on || []).length) return 0;
  const open = task.depends_on.filter((id) => {
    const dep = state.tasks.get(id);
    return !(state.doneIds.has(id) || (dep && dep.status === "done"));
  }).length;
  // unmet_deps is the server's count when the body was rendered; a dependency that
  // finished since is one we saw done.
  return typeof task.unmet_deps === "number" ? Math.min(task.unmet_deps, open) : open;
}

// A task's route in words: "agent ada · codex · gpu+ssd", or "" for anyone.
export function routeText(route) {
  if (!route) return "";
  return [route.agent ? `agent ${route.agent}` : null, route.runtime,
    (route.labels || []).length ? route.labels.join("+") : null].filter(Boolean).join(" · ");
}

export const splitList = (text) => String(text || "").split(",").map((s) => s.trim()).filter(Boolean);

export function routeBody(agent, runtime, labels) {
  const list = splitList(labels);
  if (!agent && !runtime && !list.length) return null;
  return { agent: agent || null, runtime: runtime || null, labels: list };
}

// Two routes alike for the editor: the same agent, runtime and labels (in order).
export function sameRoute(a, b) {
  const norm = (r) => JSON.stringify(r ? [r.agent || null, r.runtime || null, r.labels || []] : null);
  return norm(a) === norm(b);
}

// The verification badge: {kind, text, title}, or null for no verdict. A failure
// because nothing was configured to verify says so: a builder cannot fix it.
// A fail because nothing was configured to verify (no gate ran).
export function unverified(v, noneConfigured) {
  return Boolean(v && v.verdict === "fail" && !v.gate && v.evidence === noneConfigured);
}

export function verdictBadge(v, noneConfigured) {
  if (!v || !v.verdict) return null;
  const overridden = v.human_override ? ` (override by ${v.human_override.by})` : "";
  if (v.verdict === "pass") return { kind: "ok", text: "✓ verified", title: "verification passed" };
  if (unverified(v, noneConfigured)) {
    return { kind: "warn", text: "no verify command" + (v.human_override ? " · overridden" : ""),
      title: "no verify command is configured for this task or its repository" + overridden };
  }
  if (v.verdict === "fail") {
    return { kind: "bad", text: "✗ verify failed" + (v.human_override ? " · overridden" : ""),
      title: (v.evidence || "verification failed").slice(-400) + overridden };
  }
  return { kind: "warn", text: "⚠ debt", title: "completed with debt" + overridden };
}

// Failed attempts on a card: a task back in the queue (or blocked) after runs that
// did not finish it, with the last error. {text, title} or null.
export function attemptsBadge(task) {
  if (!task.attempts || !["todo", "blocked", "backlog"].includes(task.status)) return null;
  const error = task.error || task.feedback || "";
  if (!error) return null;
  const n = task.attempts;
  const of = task.max_attempts ? `/${task.max_attempts}` : "";
  return { text: `↻ ${n}${of} attempt${n === 1 ? "" : "s"}`, title: `${n} attempt(s); last error: ${error}`, error };
}

// The task's feedback in the detail: after a later round passed, it is round
// N's, not a finding still open -- unless the task is being worked again, sent back
// after that pass (a person's request for changes): then the feedback is theirs, now.
export function feedbackText(task) {
  if (!task.feedback) return "—";
  const v = task.verification;
  const rounds = (v && v.attempts) || [];
  if (v && v.verdict === "pass" && rounds.length > 1 && task.status !== "in_progress") {
    return `from round ${rounds.length - 1} (round ${rounds.length} passed): ${task.feedback}`;
  }
  return task.feedback;
}

// A run's number on its task (1: its first run), as the API numbers them
// (``run``); the output panel knows only the execution id.
export function runNumber(executions, executionId) {
  const found = (executions || []).find((x) => x.id === executionId);
  return found ? found.run : null;
}

// A run's cost in the runs list: an unpriced run ("unknown": no price, not a cost of
// 0) says so instead of "0¢", an estimate is marked as one.
export function runCost(execution) {
  if (execution.cost_status === "unknown") return "cost unknown";
  return `${execution.cost_cents}¢` + (execution.cost_status === "estimated" ? " (estimated)" : "");
}

// A routine's fire on its card: every fire has the routine's title, and the ids differ
// only in their cut-off tail, so the card says which slot it is ("⟳ fired 19:20", the
// date too when not today). Null for a task no routine filed.
// Whether approving a task puts it in its repository's merge queue (lands later, after
// the gate) rather than landing it now: its repository, or the path a task without one
// names, lands by queue.
export function landsByQueue(st, task) {
  const repository = task.repository || (task.metadata || {}).repo_path
    || (st.workspaceRepos ? st.workspaceRepos.get(task.id) : undefined);
  return Boolean(task.worktree_ref && repository && st.queueRepositories.has(repository));
}

// Its tooltip names the routine as the routine filter does ("Tidy the notes · 0 9 * * *
// · e20e65", from `names`: id -> name) once the team's routines are read; the bare id
// (all the card said before) only until then, or for a routine since deleted.
export function routineFire(task, now = new Date(), names = new Map()) {
  const meta = task.metadata || {};
  if (!meta.routine_id || typeof meta.slot_at !== "number") return null;
  const at = new Date(meta.slot_at);
  const pad = (n) => String(n).padStart(2, "0");
  const clock = `${pad(at.getHours())}:${pad(at.getMinutes())}`;
  const sameDay = at.toDateString() === now.toDateString();
  const day = sameDay ? "" : `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} `;
  const name = names.get(meta.routine_id);
  const routine = name ? `routine “${name}”` : `routine ${meta.routine_id}`;
  return { text: `⟳ fired ${day}${clock}`, title: `${routine}'s fire for ${at.toLocaleString()}` };
}

// A task's cost in words, for the detail panel and the review panel's total: its
// subtasks' only when they add to it, and runs with no price said, not counted as 0¢
// (the review panel knows its runs; the detail panel passes none).
// Why a task's run works where the server says (its read's run_repository.source):
// the words `clawboo task show` prints.
const RUN_REPOSITORY_SOURCES = {
  task: "",
  task_repo_path: "the task's repo_path",
  task_repo_remote: "the task's repo_remote",
  agent_default: "its agent's default",
  agent_repo_path: "its agent's repo_path",
  agent_repo_remote: "its agent's repo_remote",
};

// Where a task's run will work: `where` is the server's answer (GET of the task:
// run_repository), null until it is read (then the task's own, if it names one).
export function runRepositoryText(task, where) {
  if (!where) return task.repository || "…";
  const why = RUN_REPOSITORY_SOURCES[where.source] || "";
  const named = where.id || where.remote;
  if (named) return why ? `${named} (${why})` : named;
  if (why) return `an unregistered path (${why})`;
  if (!task.assignee_agent_id) return "none named (the claiming agent's default, if it has one)";
  return "none (its run works in a scratch directory)";
}

export function costText(cost, executions) {
  const c = cost || {};
  const unknown = (executions || []).filter((x) => x.cost_status === "unknown").length;
  const all = unknown > 0 && unknown === executions.length;
  let text = `${c.tokens || 0} tokens, ` + (all && !c.cents ? "cost unknown" : `${c.cents || 0}¢`);
  if (unknown && !all) text += ` (+ ${unknown} run${unknown === 1 ? "" : "s"} of unknown cost)`;
  if (c.tree_cents !== undefined && c.tree_cents !== null
      && (c.tree_cents !== c.cents || c.tree_tokens !== c.tokens)) {
    text += `; with subtasks ${c.tree_tokens || 0} tokens, ${c.tree_cents || 0}¢`;
  }
  return text;
}

// What the last review action said about a task stands while the task keeps the
// status it had then: "Queued to land" is stale once the queue has landed it.
export function noteStands(note, task) {
  return Boolean(note && note.id === task.id && (note.status == null || note.status === task.status));
}

// Why an agent takes no work now (null: it is at work), the one reading of an agent's
// state that both the header's "Agents · 1 with no worker" and a waiting card's "waits:
// builder has no worker" say. `kind` is the summary's word, `text` the card's.
export function agentAway(agent) {
  const name = agent.display_name || agent.id;
  if (agent.state === "paused") return { kind: "paused", text: `${name} is paused` };
  if (agent.state === "unhealthy") return { kind: "unhealthy", text: `${name} is unhealthy` };
  // Active, but left to a remote host whose worker is not there: nothing runs its work.
  if (agent.runs_on && !agent.runs_on.live) return { kind: "with no worker", text: `${name} has no worker` };
  return null;
}

// The agents of the board's team who are not at work: "1 paused", "2 unhealthy".
export function agentsSummary(agents) {
  const kinds = ["paused", "unhealthy", "with no worker"];
  const counts = new Map(kinds.map((kind) => [kind, 0]));
  for (const agent of agents) {
    const away = agentAway(agent);
    if (away) counts.set(away.kind, counts.get(away.kind) + 1);
  }
  return kinds.filter((kind) => counts.get(kind)).map((kind) => `${counts.get(kind)} ${kind}`).join(", ");
}

// The team's agents and budgets as the header last read them (GET /api/agents, GET
// /api/budgets), for the cards that wait on them: whether what a card says changed.
export function setAgents(state, agents) {
  const before = JSON.stringify([...state.agents.values()].map((a) => [a.id, agentAway(a)]));
  state.agents = new Map(agents.map((a) => [a.id, a]));
  return JSON.stringify(agents.map((a) => [a.id, agentAway(a)])) !== before;
}

export function setBudgets(state, budgets) {
  const paused = (list) => JSON.stringify(list.filter((b) => b.status === "paused").map((b) => b.id));
  const changed = paused(budgets) !== paused(state.budgets);
  state.budgets = budgets;
  return changed;
}

// The agents that may take a task: its route's agent, runtime and labels (none: any).
function mayTake(task, agent) {
  const route = task.route || {};
  if (route.agent && agent.id !== route.agent) return false;
  if (route.runtime && agent.runtime !== route.runtime) return false;
  return (route.labels || []).every((name) => (agent.labels || []).includes(name));
}

// Why a task in Todo waits, when the board knows it from what the header shows: every
// agent that may take it is not at work (paused, unhealthy, its remote host's worker
// gone), or a paused cap budget covers it (its team's, its agent's, its routine's).
// {text, title} for its card and detail panel, or null (nothing known holds it).
export function waitReason(state, task, agoText = (at) => at) {
  if (task.status !== "todo" || waiting(task)) return null;
  const takers = [...state.agents.values()].filter((agent) => mayTake(task, agent));
  const away = takers.map((agent) => [agent, agentAway(agent)]);
  if (takers.length && away.every(([, why]) => why)) {
    const title = away.map(([agent, why]) => {
      const where = agent.runs_on && !agent.runs_on.live ? ` (${agentHost(agent, agoText)})` : "";
      const reason = agent.state !== "active" && agent.state_reason ? `: ${agent.state_reason}` : "";
      return `${why.text}${reason}${where}`;
    }).join("; ");
    const text = takers.length === 1 ? away[0][1].text : `none of its ${takers.length} agents is at work`;
    return { text: `waits: ${text}`, title: `No agent that may take it is at work: ${title}` };
  }
  const agentIds = new Set(task.route && task.route.agent ? [task.route.agent] : takers.map((a) => a.id));
  const routine = (task.metadata || {}).routine_id;
  const cap = state.budgets.find((b) => b.status === "paused" && (
    (b.scope === "team" && b.scope_id === task.team)
    || (b.scope === "agent" && agentIds.has(b.scope_id) && agentIds.size === 1)
    || (b.scope === "routine" && b.scope_id === routine)));
  if (cap) {
    return { text: `waits: ${cap.scope} budget paused`,
      title: `The ${cap.window} cap of ${cap.scope} ${cap.scope_id} is spent (${cap.spent_cents}¢ of ${cap.limit_cents}¢): no run starts until it is resumed or its window ends` };
  }
  return null;
}

// Where an agent's work runs, when a remote host runs it (null: the server's workers).
export function agentHost(agent, agoText) {
  const on = agent.runs_on;
  if (!on) return "";
  if (on.live) return `runs on ${on.host}`;
  return on.seen_at
    ? `runs on ${on.host}: its worker was last seen ${agoText(on.seen_at)}`
    : `runs on ${on.host}: no worker has connected`;
}

// Which tasks wait for their paths (issue 43), as the server said: whether it changed.
export function setScopeWaits(state, waits) {
  const before = JSON.stringify([...state.scopeWaits]);
  state.scopeWaits = new Map(Object.entries(waits));
  return JSON.stringify([...state.scopeWaits]) !== before;
}

// A task's running run said nothing for a while (execution null: no longer).
export function noteStalled(state, taskId, execution, at) {
  if (execution === null) state.stalled.delete(taskId);
  else state.stalled.set(taskId, { execution, at });
}

// A task's scope in words for the detail panel: its touches, or the paths its last
// attempt changed, and what it waits for.
export function scopeText(task, wait) {
  const own = (task.touches || []).join(", ");
  const learned = !own && task.scope ? `${task.scope.join(", ")} (its last attempt's changes)` : "";
  const text = own || learned || "— (never held back)";
  return wait ? `${text}; ${wait.detail}` : text;
}
