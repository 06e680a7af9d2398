import { api } from "./kit.js";
import { resumeButton } from "./budget_resume.js";

// The Usage page's budget table: a paused cap gets the board chip's Resume (or "Who
// resumes?"), as the budgets' read says who may (may_resume: the server decides).
// After a resume its row says what the server answered.

const table = document.querySelector("#usage-budgets");
if (table) {
  const team = table.dataset.team;
  const budgets = await api("GET", "/api/budgets" + (team ? `?team=${encodeURIComponent(team)}` : "")).catch(() => []);
  const byId = new Map(budgets.map((b) => [String(b.id), b]));
  for (const row of table.querySelectorAll("tr[data-budget]")) {
    const budget = byId.get(row.dataset.budget);
    if (!budget || budget.status !== "paused") continue;
    const name = `${budget.scope.replace("_", " ")} ${budget.scope_id} · ${budget.window}`;
    row.querySelector("td.budget-status").append(" ", resumeButton(budget, name, (resumed) => {
      if (resumed) reread(row, resumed);
    }));
  }
}

function reread(row, resumed) {
  // The row says what the resume answered (the button goes with "paused").
  row.dataset.status = resumed.status;
  row.querySelector("td.budget-status").replaceChildren(resumed.status);
  row.querySelector("td.budget-spent").textContent = `${resumed.spent_cents}¢ / ${resumed.limit_cents}¢`;
}
