import { el, api, ask, money, toast } from "./kit.js";

// A paused cap budget's Resume, wherever it is shown (the board's spend chips, the
// Usage page's budget table). A person who may resume it (staff with the budget
// permission, GOVERNANCE §3 and §6; the server says so in may_resume, and the resume
// itself holds to the same rule) resumes it here, with grace or without; anyone else
// reads who may. It needs the page's one <dialog id="ask"> and #toasts
// (templates/board/ask_dialog.html).

export const WHO_RESUMES = "Only staff (with the permission to change budgets) may resume a budget: ask one, or wait for its next window.";

// `after(resumed)` runs once a Resume was tried: the budget the server answered, or
// null when it refused (the page re-reads what it shows).
export function resumeButton(budget, name, after) {
  // Whoever may not resume it is told who may, in words (a tooltip alone is nothing on
  // a phone), by a button of its own rather than a Resume that refuses.
  const may = budget.may_resume === true;
  return el("button", {
    type: "button", class: "btn ghost small budget-resume", "data-action": may ? "resume-budget" : "who-resumes",
    title: may ? null : WHO_RESUMES,
    onclick: () => (may ? resumeBudget(budget, name, after) : whoResumes(budget, name)),
  }, may ? "Resume" : "Who resumes?");
}

function pausedLine(budget, name) {
  // The Usage page's name says the scope already; the board's chip names the window.
  const scope = name.includes(budget.scope_id) ? "" : ` (${budget.scope} ${budget.scope_id})`;
  return el("p", {}, `The ${name} budget${scope} spent ${money(budget.spent_cents)} of ${money(budget.limit_cents)}: `
    + "no agent claims work it covers until it is resumed or its window ends.");
}

async function whoResumes(budget, name) {
  await ask({ title: `Paused: ${name} budget`, body: [pausedLine(budget, name), el("p", { class: "budget-who" }, WHO_RESUMES)], ok: null });
}

async function resumeBudget(budget, name, after) {
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
  let resumed = null;
  try {
    resumed = await api("POST", `/api/budgets/${encodeURIComponent(budget.id)}/resume`, raw ? { grace_cents: Number(raw) } : {});
    toast(`Resumed the ${name} budget${raw ? ` with ${money(Number(raw))} grace` : ""}.`, "ok");
  } catch (err) {
    toast(`Could not resume the ${name} budget: ${err.message}`, "bad");
  }
  if (after) after(resumed);
}
