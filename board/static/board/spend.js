import { $, el, api, money } from "./kit.js";
import { resumeButton } from "./budget_resume.js";
import { setBudgets } from "./state.js";
import { config, state } from "./page.js";

const team = config.team;
const enc = encodeURIComponent;

// --- spend against budgets ----------------------------------------------------------
// The team's budgets in the header: spent of limit per window, paused caps in red.
// Re-read (at most once a second) when a run's cost or a budget changes. A paused cap
// carries its Resume where it is seen (budget_resume.js, the Usage page's too).

let spendTimer = null;
export function loadSpendSoon() {
  if (spendTimer) return;
  spendTimer = setTimeout(() => { spendTimer = null; loadSpend(); }, 1000);
}

export async function loadSpend() {
  const box = $("#spend");
  if (!box) return;
  const budgets = await api("GET", `/api/budgets?team=${enc(team)}`).catch(() => []);
  // A paused cap holds the cards it covers: they say so (cards.js), redrawn when it changes.
  if (setBudgets(state, budgets)) document.dispatchEvent(new CustomEvent("board:waits"));
  box.hidden = !budgets.length;
  box.replaceChildren(...budgets.map((b) => {
    const pct = Math.min(100, Math.round((100 * b.spent_cents) / b.limit_cents));
    const name = b.scope === "team" ? b.window : `${b.scope.replace("_", " ")} ${b.scope_id} · ${b.window}`;
    return el("span", { class: `budget budget-${b.status}`, title: `${b.scope} ${b.scope_id}: ${b.spent_cents}¢ of ${b.limit_cents}¢ this ${b.window} (${b.mode}, ${b.status})` },
      `${name} ${money(b.spent_cents)} / ${money(b.limit_cents)}`,
      el("span", { class: "budget-bar", "aria-hidden": "true" }, el("span", { style: `width:${pct}%` })),
      b.status === "paused" ? " paused" : "",
      b.status === "paused" ? resumeButton(b, name, () => loadSpend()) : "");
  }));
}
