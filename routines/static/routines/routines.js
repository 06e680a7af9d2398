// The routines page's two small helps: cron presets fill the schedule field, and
// the list refreshes itself (states, next and last fires) while it is open.

for (const button of document.querySelectorAll("#cron-presets [data-cron]")) {
  button.addEventListener("click", () => {
    const field = document.querySelector("#id_cron_spec");
    field.value = button.dataset.cron;
    field.dispatchEvent(new Event("input", { bubbles: true }));
    field.focus();
  });
}

// The list is re-read from the server (the same page, same team) and swapped in,
// keeping which fire histories are open; not while a button in it has focus.
const live = document.querySelector("#routines-live");
if (live) {
  const every = Number(live.dataset.refreshMs) || 10000;
  const refresh = async () => {
    if (document.hidden || live.contains(document.activeElement) && document.activeElement !== document.body) return;
    try {
      const response = await fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.querySelector("#routines-live");
      if (!fresh) return;
      const open = new Set([...live.querySelectorAll("tbody.routine details[open]")]
        .map((d) => d.closest("tbody").id));
      // Notes from the last action were shown once; the fresh copy has none.
      live.replaceChildren(...fresh.childNodes);
      for (const id of open) {
        const details = live.querySelector(`#${CSS.escape(id)} details`);
        if (details) details.open = true;
      }
      live.dataset.refreshedAt = new Date().toISOString();
    } catch (err) { /* the next look tries again */ }
  };
  setInterval(refresh, every);
}
