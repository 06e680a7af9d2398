"""The live board page: server-rendered shell; data over the REST API and websocket."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from board import judgement, transitions
from board.api import COLUMN_PAGE, TERMINAL_PAGE
from board.store import NEEDS_APPROVAL
from core.api.access import visible_teams
from core.models import Runtime

# The column of tasks waiting for a person (first; the page hides it while empty).
NEEDS_APPROVAL_LABEL = "Needs approval"


class BoardLoginView(LoginView):
    """The board's login: any active user (the admin's login admits staff only).
    What they then see is the board of their own teams."""

    template_name = "board/login.html"
    redirect_authenticated_user = True


@login_required
@ensure_csrf_cookie
def board_page(request: HttpRequest) -> HttpResponse:
    wanted = request.GET.get("team")
    team_list = list(visible_teams(request.user))
    ids = [t.id for t in team_list]
    team = wanted if wanted in ids else ("default" if "default" in ids else (ids or [""])[0])
    # A link to a team the person cannot see says so, rather than quietly showing
    # another board that looks like the one they were sent to.
    team_refused = wanted if wanted and wanted not in ids else None
    # The page is a shell: columns arrive over the API a page at a time, so its
    # first paint costs the same whatever the size of the team's history.
    return render(
        request,
        "board/board.html",
        {
            "teams": team_list,
            "team": team,
            "team_refused": team_refused,
            "columns": [(NEEDS_APPROVAL, NEEDS_APPROVAL_LABEL)]
            + [(s.value, s.label) for s in transitions.Status],
            "runtimes": list(Runtime.values),
            "board_config": {
                "team": team,
                "statuses": [s.value for s in transitions.Status],
                "labels": {
                    NEEDS_APPROVAL: NEEDS_APPROVAL_LABEL,
                    **{s.value: s.label for s in transitions.Status},
                },
                "transitions": transitions.as_json(),
                "terminal": sorted(transitions.TERMINAL),
                "page": {"active": COLUMN_PAGE, "terminal": TERMINAL_PAGE},
                "user": request.user.get_username(),
                # What a route may name as its runtime (the in-place editor's menu).
                "runtimes": list(Runtime.values),
                # The evidence of a "fail" because nothing was configured to verify.
                "none_configured": judgement.NONE_CONFIGURED,
                # Who a comment can @-mention besides the team's agents.
                "members": sorted(
                    get_user_model()
                    .objects.filter(teams__id=team, machine_token__isnull=True)
                    .values_list("username", flat=True)
                ),
            },
            "is_staff": request.user.is_staff,
        },
    )
