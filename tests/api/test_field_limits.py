"""Free-text and JSON fields are bounded by one table (core.checks.FIELD_LIMITS): a
task's metadata and input and an agent's settings took anything up to the 2 MiB body
limit, kept whole; now more than their limit is a 400 naming the field and the limit,
with nothing written. The documented cuts (SPEC §10's evidence tail) keep their part."""

from __future__ import annotations

import json

import pytest

from board import store
from board.models import Task
from core import registry
from core.checks import FIELD_LIMITS, field_limit
from core.errors import ValidationFailed
from core.models import Agent

pytestmark = pytest.mark.django_db


def sized(chars: int) -> dict[str, str]:
    """An object whose compact JSON is ``chars`` characters long."""
    value = {"notes": ""}
    value["notes"] = "x" * (chars - len(json.dumps(value, separators=(",", ":"))))
    assert len(json.dumps(value, separators=(",", ":"))) == chars
    return value


def refused(response, field: str) -> None:
    body = response.json()
    assert response.status_code == 400, body
    assert (body["error"], body["field"]) == ("validation_error", field)
    assert f"{field_limit(field):,} characters" in body["detail"]


@pytest.mark.parametrize("field", ["metadata", "input"])
def test_a_task_whose_field_is_over_its_limit_is_refused_and_nothing_is_written(
    api, unchanged, field
):
    with unchanged():
        response = api.post(
            "/api/board/tasks",
            {"title": "big", field: sized(field_limit(field) + 1)},
            format="json",
        )
    refused(response, field)
    # At the limit it is kept whole.
    kept = api.post(
        "/api/board/tasks", {"title": "fits", field: sized(field_limit(field))}, format="json"
    )
    assert kept.status_code == 201, kept.json()
    assert getattr(Task.objects.get(pk=kept.json()["id"]), field) == sized(field_limit(field))


def test_a_megabyte_of_metadata_is_refused_on_patch(api, unchanged):
    task = api.post("/api/board/tasks", {"title": "t"}, format="json").json()
    with unchanged():
        response = api.patch(
            f"/api/board/tasks/{task['id']}", {"metadata": {"m": "x" * 2**20}}, format="json"
        )
    refused(response, "metadata")


def test_a_metadata_patch_that_takes_the_merge_past_the_limit_is_refused():
    half = field_limit("metadata") // 2 + 10
    task = store.create_task(title="t", metadata={"a": "x" * half}).task
    with pytest.raises(ValidationFailed) as refusal:
        store.patch_metadata(task.id, {"b": "y" * half})
    assert refusal.value.field == "metadata"
    assert store.get_task(task.id).metadata == {"a": "x" * half}


def test_an_agents_settings_over_the_limit_are_refused():
    big = {"argv": ["true"], "env": {"NOTE": "x" * field_limit("settings")}}
    with pytest.raises(ValidationFailed) as refusal:
        registry.create_agent(
            id="big", display_name="Big", team="default", runtime="command", settings=big
        )
    assert refusal.value.field == "settings"
    assert not Agent.objects.filter(pk="big").exists()
    agent = registry.create_agent(
        id="ok", display_name="Ok", team="default", runtime="command", settings={"argv": ["true"]}
    )
    with pytest.raises(ValidationFailed):
        registry.update_agent(agent.pk, {"settings": big})
    assert Agent.objects.get(pk="ok").settings == {"argv": ["true"]}


def test_a_verdicts_evidence_keeps_its_last_4000_characters(api):
    """SPEC §10: the evidence tail is 4,000 characters (the table's keep_tail row)."""
    assert FIELD_LIMITS["evidence"].chars == 4_000
    task = api.post("/api/board/tasks", {"title": "t"}, format="json").json()
    evidence = "head " + "y" * 10_000 + " the end"
    response = api.post(
        f"/api/board/tasks/{task['id']}/verdict",
        {"verdict": "fail", "evidence": evidence},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert Task.objects.get(pk=task["id"]).verdict_evidence == evidence[-4_000:]
