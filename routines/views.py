"""The routines page: every routine of the teams a person can see, its schedule in
words, next and last fire in its own timezone, its state and its recent fires; and
create / edit / pause / resume / run-now.

Views stay thin: reads and writes are :mod:`routines.store`'s, checks are
:class:`routines.forms.RoutineForm`'s (the store's), and who may create or edit is
the REST API's rule (:func:`routines.api.check_may_create` /
:func:`~routines.api.check_may_edit`). A refusal is shown beside its field or its
routine; nothing here answers a refusal with a 500.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.api.access import team_ids, visible_teams
from core.errors import ClawbooError, NotFound
from routines import store
from routines.api import (
    check_may_create,
    check_may_edit,
    check_schedule_access,
    schedule_multiplexer,
    visible_routine,
)
from routines.forms import RoutineForm
from routines.links import in_review_url
from routines.models import Routine
from routines.schedules import (
    GATEWAY_SOURCE,
    OpenClawGatewayCronScheduleSource,
    ScheduleRow,
)
from routines.wording import local_stamp, local_time, schedule_in_words

RECENT_FIRES = 5
# One click for the schedules people ask for most (the field takes any cron).
CRON_PRESETS = (
    ("*/15 * * * *", "Every 15 minutes"),
    ("0 * * * *", "Hourly"),
    ("0 9 * * *", "Daily at 09:00"),
    ("0 9 * * 1-5", "Weekdays at 09:00"),
    ("0 9 * * 1", "Mondays at 09:00"),
    ("0 0 1 * *", "Monthly, on the 1st"),
)
_MOVES = {
    "pause": (store.pause_routine, "Paused"),
    "resume": (store.resume_routine, "Resumed"),
    "run-now": (store.run_routine_now, "Queued to run now"),
}
# A gateway cron job's moves, as PATCH/POST bodies of /api/schedules would name them.
_GATEWAY_MOVES = {"pause": "Paused", "resume": "Resumed", "run-now": "Asked the gateway to run"}


@dataclass(frozen=True)
class RoutineRow:
    """One routine as the page shows it."""

    routine: Routine
    title: str
    words: str
    state: str
    next_stamp: str
    next_at: dt.datetime | None
    last_stamp: str
    last_at: dt.datetime | None
    # Under a minute either side of now: "just now" / "in under a minute", where
    # Django's timesince says "0 minutes".
    last_just_now: bool
    next_within_a_minute: bool
    moves: tuple[str, ...]
    fires: list[tuple[str, store.FireRow]]  # (slot in the routine's timezone, fire)
    notes: list[Any]  # messages about this routine from the last action
    in_review: int  # its fires waiting in review (store.waiting_in_review)
    in_review_url: str  # the board's In review column, filtered to its fires


def _row(
    routine: Routine, fires: list[store.FireRow], notes: list[Any], in_review: int = 0
) -> RoutineRow:
    tz = routine.timezone
    state = store.state_of(routine)
    # A paused or errored row keeps its old slot, but fires nothing until resumed
    # (which re-arms from then): showing that slot would promise a fire.
    upcoming = None if state in ("paused", "error") else routine.next_run_at
    at = store.now_ms()
    return RoutineRow(
        routine=routine,
        title=str((routine.task_template or {}).get("title") or store.DEFAULT_TITLE),
        words=schedule_in_words(routine.cron_spec, tz),
        state=state,
        next_stamp=local_stamp(upcoming, tz),
        next_at=local_time(upcoming, tz) if upcoming is not None else None,
        last_stamp=local_stamp(routine.last_run_at, tz),
        last_at=local_time(routine.last_run_at, tz) if routine.last_run_at is not None else None,
        last_just_now=routine.last_run_at is not None and at - routine.last_run_at < 60_000,
        next_within_a_minute=upcoming is not None and abs(upcoming - at) < 60_000,
        moves=store.offered_moves(routine),
        fires=[(local_stamp(f.fire.slot_at, tz), f) for f in fires],
        notes=notes,
        in_review=in_review,
        in_review_url=in_review_url(routine),
    )


@login_required
def routines_page(request: HttpRequest) -> HttpResponse:
    teams = list(visible_teams(request.user))
    ids = [t.id for t in teams]
    wanted = request.GET.get("team") or ""
    team = wanted if wanted in ids else ""
    routines = list(store.list_routines(team=[team] if team else ids))
    fires = store.recent_fires([r.id for r in routines], per_routine=RECENT_FIRES)
    in_review = store.waiting_in_review([r.id for r in routines])
    notes: dict[str, list[Any]] = {}
    general: list[Any] = []
    for message in messages.get_messages(request):
        tag = message.extra_tags or ""
        if tag.startswith("routine:"):
            notes.setdefault(tag.removeprefix("routine:"), []).append(message)
        else:
            general.append(message)
    # The other domain of the Scheduler: the OpenClaw gateway's own-life cron, not
    # team work -- shown beside the routines, its writes staff-only (the API's rule).
    gateway_cron = OpenClawGatewayCronScheduleSource().read()
    return render(
        request,
        "routines/routines.html",
        {
            "teams": teams,
            "team": team,
            "gateway_cron": gateway_cron,
            "rows": [_row(r, fires[r.id], notes.get(r.id, []), in_review[r.id]) for r in routines],
            "general_messages": general,
            "is_staff": request.user.is_staff,
        },
    )


def _form_page(request: HttpRequest, form: RoutineForm, routine: Routine | None) -> HttpResponse:
    return render(
        request,
        "routines/routine_form.html",
        {
            # The list's team, so its links (and the way back) keep to it.
            "team": _page_list_team(request),
            "form": form,
            "routine": routine,
            "row": _row(routine, [], []) if routine is not None else None,
            "cron_presets": CRON_PRESETS,
            "is_staff": request.user.is_staff,
        },
    )


def _page_team(request: HttpRequest) -> str:
    """The team the list was showing ("" for all), carried by the action's form."""
    team = request.POST.get("team") or request.GET.get("team") or ""
    return team if team in {t.id for t in list(visible_teams(request.user))} else ""


def _page_list_team(request: HttpRequest) -> str:
    """The team of the list a form was opened from (its URL's ``?team=``; the form's
    own ``team`` field is the routine's)."""
    team = request.GET.get("team") or ""
    return team if team in {t.id for t in list(visible_teams(request.user))} else ""


def _list_url(team: str) -> str:
    return reverse("routines") + (f"?{urlencode({'team': team})}" if team else "")


def _back_to(routine: Routine, team: str = "") -> HttpResponseRedirect:
    # Back to the list as it was shown (its team), at the routine's row.
    return HttpResponseRedirect(f"{_list_url(team)}#routine-{routine.id}")


@login_required
def new_routine(request: HttpRequest) -> HttpResponse:
    teams = team_ids(request.user)
    if request.method != "POST":
        listed = _page_list_team(request)
        initial = {"team": listed} if listed else {}
        return _form_page(
            request, RoutineForm(teams=teams, user=request.user, initial=initial), None
        )
    form = RoutineForm(request.POST, teams=teams, user=request.user)
    if form.is_valid():
        try:
            data = form.cleaned_data
            check_may_create(request, data["team"].pk, data["agent"].pk, form.task_template())
            routine = form.save()
        except ClawbooError as exc:
            form.add_refusal(exc)
        else:
            messages.success(request, "Routine created", extra_tags=f"routine:{routine.id}")
            return _back_to(routine, _page_list_team(request))
    return _form_page(request, form, None)


def _visible_or_404(request: HttpRequest, routine_id: str) -> Routine:
    try:
        return visible_routine(request.user, routine_id)
    except NotFound:
        raise Http404("no such routine") from None


@login_required
def edit_routine(request: HttpRequest, routine_id: str) -> HttpResponse:
    routine = _visible_or_404(request, routine_id)
    teams = team_ids(request.user)
    if request.method != "POST":
        return _form_page(
            request, RoutineForm(instance=routine, teams=teams, user=request.user), routine
        )
    form = RoutineForm(request.POST, instance=routine, teams=teams, user=request.user)
    if form.is_valid():
        try:
            check_may_edit(request, routine_id, form.changes())
            saved = form.save()
        except NotFound:
            raise Http404("no such routine") from None
        except ClawbooError as exc:
            form.add_refusal(exc)
        else:
            messages.success(request, "Routine saved", extra_tags=f"routine:{saved.id}")
            return _back_to(saved, _page_list_team(request))
    # Show the row as stored, not as the rejected form left the instance.
    return _form_page(request, form, store.get_routine(routine_id))


@login_required
@require_POST
def move_routine(request: HttpRequest, routine_id: str, move: str) -> HttpResponse:
    if move not in _MOVES:
        raise Http404("no such move")
    routine = _visible_or_404(request, routine_id)
    write, verb = _MOVES[move]
    tag = f"routine:{routine.id}"
    try:
        check_may_edit(request, routine_id, {})
        write(routine_id)
    except NotFound:
        raise Http404("no such routine") from None
    except ClawbooError as exc:
        messages.error(request, f"Not done: {exc.detail}", extra_tags=tag)
    else:
        messages.success(request, verb, extra_tags=tag)
    return _back_to(routine, _page_team(request))


@login_required
def delete_routine(request: HttpRequest, routine_id: str) -> HttpResponse:
    """GET asks (what goes, what stays); POST deletes and returns to the list as it was."""
    routine = _visible_or_404(request, routine_id)
    team = _page_team(request)
    if request.method != "POST":
        return render(
            request,
            "routines/routine_delete.html",
            {
                "row": _row(routine, [], []),
                "team": team,
                "back": f"{_list_url(team)}#routine-{routine.id}",
                "is_staff": request.user.is_staff,
            },
        )
    try:
        check_may_edit(request, routine_id, {})
        store.delete_routine(routine_id)
    except NotFound:
        raise Http404("no such routine") from None
    except ClawbooError as exc:
        messages.error(request, f"Not deleted: {exc.detail}", extra_tags=f"routine:{routine.id}")
        return _back_to(routine, team)
    title = (routine.task_template or {}).get("title") or store.DEFAULT_TITLE
    messages.success(request, f"Deleted routine {routine.id} ({title})")
    return HttpResponseRedirect(_list_url(team))


# --- the gateway's own-life cron: staff operate it through the Scheduler surface ----
# The page writes through the same multiplexer and access rule as /api/schedules, so
# it offers nothing the API (or the gateway behind it) would refuse.


def _gateway_job(job_id: str) -> ScheduleRow:
    """The job as the gateway lists it now (404 when it is not there)."""
    wanted = f"{GATEWAY_SOURCE}:{job_id}"
    for job in OpenClawGatewayCronScheduleSource().read().rows:
        if job.id == wanted:
            return job
    raise Http404("no such gateway cron job")


def _back_to_gateway(team: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(f"{_list_url(team)}#gateway-cron")


@login_required
@require_POST
def move_gateway_job(request: HttpRequest, job_id: str, move: str) -> HttpResponse:
    if move not in _GATEWAY_MOVES:
        raise Http404("no such move")
    schedule_id = f"{GATEWAY_SOURCE}:{job_id}"
    mux = schedule_multiplexer(request.user)
    try:
        check_schedule_access(request.user, mux, schedule_id)
        if move == "run-now":
            mux.run(schedule_id)
        else:
            mux.update(schedule_id, {"action": move})
    except ClawbooError as exc:
        messages.error(request, f"Gateway cron job {job_id}: not done: {exc.detail}")
    else:
        messages.success(request, f"Gateway cron job {job_id}: {_GATEWAY_MOVES[move]}")
    return _back_to_gateway(_page_team(request))


@login_required
def delete_gateway_job(request: HttpRequest, job_id: str) -> HttpResponse:
    """GET asks (it is the gateway's job, not team work); POST removes it."""
    team = _page_team(request)
    schedule_id = f"{GATEWAY_SOURCE}:{job_id}"
    mux = schedule_multiplexer(request.user)
    if request.method != "POST":
        job = _gateway_job(job_id)
        return render(
            request,
            "routines/gateway_job_delete.html",
            {
                "job": job,
                "team": team,
                "back": f"{_list_url(team)}#gateway-cron",
                "is_staff": request.user.is_staff,
            },
        )
    try:
        check_schedule_access(request.user, mux, schedule_id)
        mux.delete(schedule_id)
    except ClawbooError as exc:
        messages.error(request, f"Gateway cron job {job_id}: not deleted: {exc.detail}")
        return _back_to_gateway(team)
    messages.success(request, f"Deleted gateway cron job {job_id}")
    return _back_to_gateway(team)
