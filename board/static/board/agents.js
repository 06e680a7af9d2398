// The team's agents: state, health, pause and resume (GOVERNANCE §2), in the side
// panel and behind the header's Agents button, which says who is not at work.
import { $, el, api, ago, toast } from "./kit.js";
import { agentHost, agentsSummary, setAgents } from "./state.js";
import { config, state } from "./page.js";

const team = config.team;
const enc = encodeURIComponent;

let agents = null;                // the team's agents, for moves that claim
export async function teamAgents() {
  if (agents === null) {
    const all = await api("GET", `/api/agents?team=${enc(team)}`).catch(() => []);
    agents = all.filter((a) => a.team === team);
  }
  return agents;
}

export async function renderAgents() {
  const all = await api("GET", `/api/agents?team=${enc(team)}`).catch(() => null);
  if (all === null) return;
  agents = all.filter((a) => a.team === team);
  // The cards that wait on an agent say so too (cards.js): redrawn when that changes.
  if (setAgents(state, agents)) document.dispatchEvent(new CustomEvent("board:waits"));
  const summary = agentsSummary(agents);
  $("#agents-summary").textContent = summary ? `· ${summary}` : "";
  $("#agents-toggle").dataset.attention = summary ? "true" : "false";
  $("#agent-options").replaceChildren(...agents.map((a) => el("option", { value: a.id }, a.display_name)));
  $("#agents").replaceChildren(...agents.map((a) => {
    const why = a.state === "unhealthy" ? (a.health || {}).detail : a.state_reason;
    // Resuming is its owner's or staff's (as editing it is; the server says which
    // in may_resume); pausing is any member's, a brake anyone may pull.
    const mayResume = a.may_resume !== false;
    const notYours = `Only its owner${a.owner ? ` (${a.owner})` : ""} or staff may resume it`;
    const act = a.state === "paused"
      ? el("button", {
          type: "button", class: "btn ghost small", "data-action": "resume",
          disabled: mayResume ? null : "", title: mayResume ? null : notYours,
          onclick: () => agentAction(a, "resume"),
        }, "Resume")
      : el("button", { type: "button", class: "btn ghost small", "data-action": "pause", onclick: () => agentAction(a, "pause") }, "Pause");
    return el("li", { class: `agent state-${a.state}`, "data-agent": a.id },
      el("strong", {}, a.display_name), ` ${a.runtime} `,
      el("span", { class: `badge ${a.state === "active" ? "ok" : "bad"} agent-state`, title: why || a.state }, a.state),
      (a.labels || []).length ? el("span", { class: "muted" }, ` ${a.labels.join(", ")}`) : "",
      " ", act,
      // Why it takes no work, in words: a tooltip alone is nothing on a phone.
      why && a.state !== "active" ? el("div", { class: "agent-why warn" }, why) : "",
      a.state === "paused" && !mayResume ? el("div", { class: "agent-who muted" }, `${notYours}.`) : "",
      a.runs_on ? el("div", { class: `agent-host ${a.runs_on.live ? "muted" : "warn"}` }, agentHost(a, ago)) : "");
  }));
}

async function agentAction(agent, action) {
  try {
    await api("POST", `/api/agents/${enc(agent.id)}/${action}`, action === "pause" ? { reason: "paused from the board" } : {});
  } catch (err) {
    toast(`Could not ${action} ${agent.display_name}: ${err.message}`, "bad");
  }
  renderAgents();
}
