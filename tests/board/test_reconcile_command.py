from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.management import call_command

from board import store

pytestmark = pytest.mark.django_db


def test_reconcile_command_runs_each_pass(capsys, default_team):
    task = store.create_task(title="t").task
    got = store.claim(task.id, "ada")
    store.open_execution(task.id, got.ticket)
    call_command("reconcile")
    out = capsys.readouterr().out
    assert "orphans: released 0" in out and "stale: released 0" in out
    later = store.now() + dt.timedelta(minutes=10)
    with time_machine.travel(later, tick=False):
        call_command("reconcile", "--stale")
    assert f"stale: released 1 task(s) {task.id}" in capsys.readouterr().out
    assert store.get_task(task.id).status == "todo"
    call_command("reconcile", "--orphans")
    assert "orphans: released 0" in capsys.readouterr().out


def test_reconcile_lapsed_releases_a_claim_whose_lease_ran_out(capsys, default_team):
    task = store.create_task(title="t").task
    store.claim(task.id, "ada")  # its run never opened: only the lapse pass frees it
    call_command("reconcile", "--lapsed")
    assert "lapsed: released 0" in capsys.readouterr().out
    later = store.now() + dt.timedelta(hours=1)
    with time_machine.travel(later, tick=False):
        call_command("reconcile", "--lapsed")
    assert f"lapsed: released 1 task(s) {task.id}" in capsys.readouterr().out
    assert store.get_task(task.id).status == "todo"
