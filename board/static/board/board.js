// The live board: REST for reads and writes, the websocket for every committed change.
// The legal status targets come from the server's transition table (board-config).
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("board-config").textContent);
  const team = config.team;
  const tasks = new Map();          // id -> task body
  let selected = null;
  let lastSeq = 0;                  // highest event seq applied
  let socket = null;
  let retryMs = 500;

  const $ = (sel) => document.querySelector(sel);
  const el = (tag, attrs, ...kids) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null) node.setAttribute(k, v);
    }
    for (const kid of kids.flat()) {
      if (kid !== null && kid !== undefined) node.append(kid instanceof Node ? kid : String(kid));
    }
    return node;
  };

  function csrf() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  async function api(method, path, body) {
    const response = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf(), Accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = response.status === 204 ? null : await response.json().catch(() => null);
    if (!response.ok) {
      const error = new Error((data && data.detail) || response.statusText);
      error.body = data;
      throw error;
    }
    return data;
  }

  function age(iso) {
    if (!iso) return "";
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    return s < 90 ? `${s}s` : s < 5400 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`;
  }

  function blockedBy(task) {
    return (task.depends_on || []).filter((id) => {
      const dep = tasks.get(id);
      return !dep || dep.status !== "done";
    }).length;
  }

  function card(task) {
    const meta = [];
    if (task.assignee_agent_id) meta.push(el("span", {}, "@" + task.assignee_agent_id));
    meta.push(el("span", { class: "pill prio", title: "priority" }, "P" + task.priority));
    for (const label of task.labels || []) meta.push(el("span", { class: "pill" }, label));
    const waits = blockedBy(task);
    if (waits) meta.push(el("span", { class: "pill blocked-by", title: "blocked by" }, `blocked by ${waits}`));
    if (task.status === "in_progress") {
      meta.push(el("span", { title: "last heartbeat" }, "beat " + age(task.updated_at) + " ago"));
      if (task.lease_until) meta.push(el("span", { title: "lease until " + task.lease_until }, "lease " + age(task.lease_until)));
    }
    return el("article", {
      class: "card" + (task.id === selected ? " selected" : ""),
      "data-task-id": task.id, tabindex: "0",
      onclick: () => select(task.id),
      onkeydown: (e) => { if (e.key === "Enter") select(task.id); },
    }, el("div", { class: "title" }, task.title), el("div", { class: "meta" }, meta));
  }

  function render() {
    const columns = $("#columns");
    columns.replaceChildren();
    for (const status of config.statuses) {
      const here = [...tasks.values()]
        .filter((t) => t.status === status && !t.dropped)
        .sort((a, b) => b.priority - a.priority || (a.created_at < b.created_at ? 1 : -1));
      columns.append(el("div", { class: "column", "data-status": status },
        el("h2", {}, config.labels[status], el("span", {}, here.length)),
        here.map(card)));
    }
    if (selected && tasks.has(selected)) {
      // Only when the task changed: the panel reads its review (git) and may hold
      // feedback being typed.
      const shown = tasks.get(selected);
      const key = `${shown.id}:${shown.revision}`;
      if (key !== detailKey) { detailKey = key; renderDetail(shown); }
    }
  }
  let detailKey = null;

  let agents = null;                // the team's agents, for moves that claim
  async function teamAgents() {
    if (agents === null) {
      const all = await api("GET", "/api/agents").catch(() => []);
      agents = all.filter((a) => a.team === team);
    }
    return agents;
  }

  // A move into in_progress takes a claim for a named agent; the server refuses it
  // without one. Default: the agent that worked the task, else the team's first.
  async function pickAgent(task) {
    const names = (await teamAgents()).map((a) => a.id);
    const fallback = task.assignee_agent_id || names[0] || "";
    const who = prompt(`Claim for which agent? (${names.join(", ") || "none registered"})`, fallback);
    return who ? who.trim() : null;
  }

  function statusMenu(task) {
    const options = [task.status, ...(config.transitions[task.status] || [])];
    const select = el("select", {
      class: "status-menu", "aria-label": "Move to",
      onchange: async (e) => {
        const to = e.target.value;
        try {
          if (to === "done" && task.status === "in_review") {
            await approve(task);  // approving lands the change
            return;
          }
          const body = { to };
          if (to === "done" && task.verification && task.verification.verdict &&
              task.verification.verdict !== "pass") {
            const override = askOverride();
            if (!override) { render(); return; }
            body.human_override = override;
          }
          if (to === "in_progress") {
            const agent = await pickAgent(task);
            if (!agent) { render(); return; }
            body.agent_id = agent;
          }
          upsert(await api("POST", `/api/board/tasks/${encodeURIComponent(task.id)}/transition`, body));
        } catch (err) {
          alert(err.message);
          render();
        }
      },
    }, options.map((s) => el("option", { value: s, ...(s === task.status ? { selected: "" } : {}) },
      s === task.status ? config.labels[s] + " (current)" : config.labels[s])));
    return select;
  }

  function askOverride() {
    const by = prompt("Verification is not passing. Override as (your name):", config.user);
    if (!by) return null;
    const reason = prompt("Why override the verification verdict?") || "";
    return { by, reason };
  }

  let lastNote = null;               // what the last review action said, per task
  function say(text, kind) {
    lastNote = { id: selected, text, kind: kind || "" };
    const note = $("#review-note");
    if (note) { note.textContent = text; note.dataset.kind = lastNote.kind; }
  }

  async function approve(task) {
    const body = {};
    const v = task.verification;
    if (v && v.verdict && v.verdict !== "pass") {
      const override = askOverride();
      if (!override) { render(); return; }
      body.human_override = override;
    }
    try {
      const result = await api("POST", `/api/board/tasks/${encodeURIComponent(task.id)}/approve`, body);
      upsert(result.task);
      if (result.result === "conflict") {
        say(`Not landed: conflict in ${result.conflicts.join(", ")}; ` +
            (result.sent === "rework" ? "sent back to its agent." : "blocked."), "bad");
      } else if (result.result === "landed") {
        say(`Landed ${result.commit.slice(0, 12)} on ${result.base_branch}.`, "ok");
      } else {
        say("Approved.", "ok");
      }
    } catch (err) { say(err.message, "bad"); }
  }

  async function requestChanges(task, feedback) {
    if (!feedback.trim()) { say("Write what should change first.", "bad"); return; }
    try {
      upsert(await api("POST", `/api/board/tasks/${encodeURIComponent(task.id)}/request-changes`, { feedback }));
      say("Sent back with your feedback.", "ok");
    } catch (err) { say(err.message, "bad"); }
  }

  // A unified diff, one line per row, coloured by its first character.
  function patchView(text) {
    return el("pre", { class: "patch" }, (text || "").split("\n").map((line) => {
      const kind = line.startsWith("+++") || line.startsWith("---") ? "meta"
        : line.startsWith("+") ? "add" : line.startsWith("-") ? "del"
        : line.startsWith("@@") ? "hunk" : line.startsWith("diff ") || line.startsWith("index ") ? "meta" : "";
      return el("span", { class: "ln " + kind }, line + "\n");
    }));
  }

  function reviewView(task, data) {
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
      el("p", {}, `total: ${data.cost.tokens} tokens, ${data.cost.cents}¢`),
      el("ol", { class: "runs" }, data.executions.map((x) => el("li", {},
        el("details", {},
          el("summary", {}, `#${x.attempt} ${x.agent_id} (${x.runtime || "?"}) ${x.status} · ${x.tokens} tokens · ${x.cost_cents}¢`),
          el("pre", { class: "log" }, x.log_tail || "(no output)"))))));
    if (task.status === "in_review") {
      const text = el("textarea", { id: "review-feedback", rows: "3", placeholder: "What should change?" });
      box.append(el("div", { class: "review-actions" },
        el("button", { id: "approve-btn", type: "button", onclick: () => approve(task) }, "Approve and land"),
        text,
        el("button", { id: "request-changes-btn", type: "button", onclick: () => requestChanges(task, text.value) }, "Request changes")));
    }
    const note = lastNote && lastNote.id === task.id ? lastNote : null;
    box.append(el("p", { id: "review-note", class: "review-note", "data-kind": note ? note.kind : "" },
      note ? note.text : ""));
    return box;
  }

  async function renderDetail(task) {
    const panel = $("#detail");
    panel.hidden = false;
    const v = task.verification;
    panel.replaceChildren(
      el("h2", {}, task.title),
      el("label", {}, "Status ", statusMenu(task)),
      el("dl", {},
        el("dt", {}, "id"), el("dd", {}, task.id),
        el("dt", {}, "assignee"), el("dd", {}, task.assignee_agent_id || "—"),
        el("dt", {}, "attempts"), el("dd", {}, `${task.attempts}${task.max_attempts ? " / " + task.max_attempts : ""}`),
        el("dt", {}, "depends on"), el("dd", {}, (task.depends_on || []).map((id) => {
          const dep = tasks.get(id);
          return `${dep ? dep.title : id} (${dep ? dep.status : "?"})`;
        }).join(", ") || "—"),
        el("dt", {}, "verification"), el("dd", { class: v && v.verdict ? "verdict-" + v.verdict : "" },
          v ? `${v.verdict || "—"}${v.human_override ? " (override by " + v.human_override.by + ")" : ""}` : "unverified"),
        el("dt", {}, "worktree"), el("dd", {}, task.worktree_ref ? `${task.worktree_ref} @ ${task.branch_ref || ""}` : "—"),
        el("dt", {}, "error"), el("dd", {}, task.error || "—"),
        el("dt", {}, "feedback"), el("dd", {}, task.feedback || "—"),
      ),
      task.description ? el("pre", {}, task.description) : "",
      el("div", { id: "review" }),
      el("h3", {}, "Comments"), el("ol", { id: "comments" }),
    );
    try {
      const id = encodeURIComponent(task.id);
      const [comments, data] = await Promise.all([
        api("GET", `/api/board/tasks/${id}/comments`),
        api("GET", `/api/board/tasks/${id}/review`),
      ]);
      if (selected !== task.id) return;
      $("#comments").replaceChildren(...comments.map((c) => el("li", {}, `${c.author}: ${c.body}`)));
      $("#review").replaceChildren(reviewView(task, data));
    } catch (err) { /* the panel keeps what it has */ }
  }

  function select(id) { selected = id; detailKey = null; render(); }

  function upsert(task) {
    if (task.team !== team) return;
    tasks.set(task.id, task);
    render();
  }

  function chatLine(frame) {
    const log = $("#chat");
    log.append(el("li", { "data-seq": frame.seq }, frame.body));
    while (log.children.length > 300) log.firstChild.remove();
    log.scrollTop = log.scrollHeight;
  }

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
    if (frame.type === "task-change") upsert(frame.task);
    else if (frame.type === "chat") chatLine(frame);
  }

  function setConn(state, text) {
    const badge = $("#conn");
    badge.dataset.state = state;
    badge.textContent = text;
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/board/?team=${encodeURIComponent(team)}`);
    socket.onopen = () => { retryMs = 500; };
    socket.onmessage = (msg) => {
      const frame = JSON.parse(msg.data);
      if (frame.type === "hello") {
        setConn("live", "live");
        // Replay everything after what we have: nothing missed while we were away.
        if (frame.seq > lastSeq) socket.send(JSON.stringify({ type: "since", seq: lastSeq }));
        return;
      }
      if (frame.type === "reload") {
        // What we missed is no longer in the log: start over from the tasks.
        lastSeq = frame.seq;
        tasks.clear();
        load();
        return;
      }
      apply(frame);
    };
    socket.onclose = () => {
      setConn("reconnecting", "reconnecting…");
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 8000);
    };
  }

  async function load() {
    // The head of the log first, then the tasks: anything after it comes by "since".
    let url = `/api/board/tasks?team=${encodeURIComponent(team)}&limit=500`;
    const seen = new Map();
    while (url) {
      const page = await api("GET", url);
      for (const task of page.results) seen.set(task.id, task);
      url = page.next;
    }
    for (const [id, task] of seen) tasks.set(id, task);
    render();
  }

  async function loadChat() {
    try {
      const lines = await api("GET", `/api/teams/${encodeURIComponent(team)}/chat?limit=50`);
      for (const line of lines.reverse()) chatLine(line);
    } catch (err) { /* chat is narration; the board works without it */ }
  }

  $("#new-task-btn").addEventListener("click", () => $("#new-task").showModal());
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
    if (data.get("backlog")) body.status = "backlog";
    try {
      upsert(await api("POST", "/api/board/tasks", body));
      form.reset();
      $("#new-task-error").textContent = "";
      $("#new-task").close();
    } catch (err) {
      $("#new-task-error").textContent = err.message;
    }
  });
  setInterval(render, 15000);  // keep heartbeat ages honest

  (async () => {
    const hello = await api("GET", `/api/teams/${encodeURIComponent(team)}/events`).catch(() => null);
    if (hello) lastSeq = hello.seq;
    await Promise.all([load(), loadChat()]);
    connect();
  })();
})();
