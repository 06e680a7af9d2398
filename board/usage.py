"""The usage page: spend per team and agent for today, this week and this month, and
a chart of the last 30 days (plain SVG, drawn here: no script, no build)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from board.store import now, spend
from core.api.access import visible_teams

CHART_W, CHART_H, PAD = 720, 180, 24


@login_required
def usage_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    staff = user.is_staff or user.is_superuser
    teams = list(visible_teams(user))
    ids = [t.id for t in teams]
    wanted = request.GET.get("team") or ""
    chosen = [wanted] if wanted in ids else ids
    at = now()
    report = spend.usage_report(chosen, at)
    budgets = [b.as_dict(at) for b in spend.list_budgets(chosen)]
    return render(
        request,
        "board/usage.html",
        {
            "teams": teams,
            "team": wanted if wanted in ids else "",
            "report": report,
            "budgets": budgets,
            "chart": chart(report.daily),
            "is_staff": staff,
        },
    )


def chart(daily: list[dict[str, Any]]) -> dict[str, Any]:
    """Bars for the daily figures, scaled to the largest day (at least 1¢)."""
    top = max([d["cents"] for d in daily] + [1])
    width = (CHART_W - 2 * PAD) / max(len(daily), 1)
    bars = []
    for n, day in enumerate(daily):
        height = (CHART_H - 2 * PAD) * day["cents"] / top
        bars.append(
            {
                "x": round(PAD + n * width + 1, 1),
                "y": round(CHART_H - PAD - height, 1),
                "w": round(max(width - 2, 1), 1),
                "h": round(height, 1),
                "day": day["day"],
                "cents": day["cents"],
            }
        )
    return {
        "w": CHART_W,
        "h": CHART_H,
        "pad": PAD,
        "top": top,
        "bars": bars,
        "base": CHART_H - PAD,
        "first": daily[0]["day"] if daily else "",
        "last": daily[-1]["day"] if daily else "",
        # Nothing spent: an empty chart scaled to "1¢" read as a broken one.
        "empty": not any(d["cents"] for d in daily),
    }
