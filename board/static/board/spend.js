import { $, el, api, ask, money, toast } from "./kit.js";
import { config } from "./page.js";

const team = config.team;
const enc = encodeURIComponent;

// --- spend against budgets ----------------------------------------------------------
// The team's budgets in the header: spent of limit per window, paused caps in red.
// Re-read (at most once a second) when a run's cost or a budget changes. A paused cap
// carries its Resume where it is seen: a person who may resume it (staff with the
// budget permission, GOVERNANCE §3 and §6; the server says so in may_resume) resumes
// it here, with grace or without; anyone else reads who may.

let spendTimer = null;
export function loadSpendSoon() {
  if (spendTimer) return;
  spendTimer = setTimeout(() => { spendTimer = null; loadSpend(); }, 1000);
}

export async function loadSpend() {
  const box = $("#spend");
  if (!box) return;
  const budgets = await api("GET", `/api/budgets?team=${enc(team)}`).catch(() => []);
  box.hidden = !budgets.length;
  box.replaceChildren(...budgets.map((b) => {
    const pct = Math.min(100, Math.round((100 * b.spent_cents) / b.limit_cents));
    const name = b.scope === "team" ? b.window : `${b.scope.replace("_", " ")} ${b.scope_id} · ${b.window}`;
    return el("span", { class: `budget budget-${b.status}`, title: `${b.scope} ${b.scope_id}: ${b.spent_cents}¢ of ${b.limit_cents}¢ this ${b.window} (${b.mode}, ${b.status})` },
      `${name} ${money(b.spent_cents)} / ${money(b.limit_cents)}`,
      el("span", { class: "budget-bar", "aria-hidden": "true" }, el("span", { style: `width:${pct}%` })),
      b.status === "paused" ? " paused" : "",
      b.status === "paused" ? resumeButton(b, name) : "");
  }));
}

const WHO_RESUMES = "Only staff (with the permission to change budgets) may resume a budget: ask one, or wait for its next window.";

function resumeButton(budget, name) {
  // Whoever may not resume it is told who may, in words (a tooltip alone is nothing on
  // a phone), by a button of its own rather than a Resume that refuses.
  const may = budget.may_resume === true;
  return el("button", {
    type: "button", class: "btn ghost small budget-resume", "data-action": may ? "resume-budget" : "who-resumes",
    title: may ? null : WHO_RESUMES,
    onclick: () => (may ? resumeBudget(budget, name) : whoResumes(budget, name)),
  }, may ? "Resume" : "Who resumes?");
}

function pausedLine(budget, name) {
  return el("p", {}, `The ${name} budget (${budget.scope} ${budget.scope_id}) spent ${money(budget.spent_cents)} of ${money(budget.limit_cents)}: `
    + "no agent claims work it covers until it is resumed or its window ends.");
}

async function whoResumes(budget, name) {
  await ask({ title: `Paused: ${name} budget`, body: [pausedLine(budget, name), el("p", { class: "budget-who" }, WHO_RESUMES)], ok: null });
}

async function resumeBudget(budget, name) {
  const grace = el("input", { type: "number", name: "grace", min: "1", step: "1", inputmode: "numeric", placeholder: "none", id: "budget-grace" });
  const data = await ask({
    title: `Resume the ${name} budget`,
    body: [
      pausedLine(budget, name),
      el("label", { for: "budget-grace" }, "Grace in cents (optional): how much more it may spend this window"),
      grace,
      el("p", { class: "muted" }, "Without grace it pauses again at its next spend."),
    ],
    ok: "Resume",
    validate: (form) => {
      const raw = String(form.get("grace") || "").trim();
      return raw && !(/^\d+$/.test(raw) && Number(raw) >= 1) ? "Grace is a whole number of cents, 1 or more." : null;
    },
  });
  if (data === null) return;
  const raw = String(data.get("grace") || "").trim();
  try {
    await api("POST", `/api/budgets/${encodeURIComponent(budget.id)}/resume`, raw ? { grace_cents: Number(raw) } : {});
    toast(`Resumed the ${name} budget${raw ? ` with ${money(Number(raw))} grace` : ""}.`, "ok");
  } catch (err) {
    toast(`Could not resume the ${name} budget: ${err.message}`, "bad");
  }
  loadSpend();
}
