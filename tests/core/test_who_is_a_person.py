"""Who is "a person" where a run the server starts by itself (a routine's fire, the
critic) is refused: a participant of kind ``human``. Runtime ``human`` runs nothing on
the server -- a person's runtime, or an outside agent acting through the API with its
own key, which is the agent side (GOVERNANCE §6) -- refused the same, but never
called a person."""

from __future__ import annotations

import pytest

from core import registry
from core.errors import ValidationFailed
from routines.errors import HumanParticipantRefused
from routines.store import check_not_human

pytestmark = pytest.mark.django_db


def test_an_outside_agent_on_runtime_human_is_refused_as_a_reviewer_without_being_called_a_person(
    default_team,
):
    registry.create_agent(id="bot", display_name="Bot", team="default", runtime="human")
    with pytest.raises(ValidationFailed) as refused:
        registry.set_reviewer_agent("default", "bot")
    assert refused.value.field == "reviewer_agent"
    assert "is a person" not in refused.value.detail
    assert "runs nothing on this server" in refused.value.detail


def test_an_outside_agent_on_runtime_human_is_refused_for_a_routine_not_called_a_person(
    default_team,
):
    bot = registry.create_agent(id="bot", display_name="Bot", team="default", runtime="human")
    with pytest.raises(HumanParticipantRefused) as refused:
        check_not_human(bot)
    assert "is a person" not in refused.value.detail
    assert "runs nothing on this server" in refused.value.detail
    assert 'route: {"agent": "bot"}' in refused.value.detail


@pytest.mark.parametrize("runtime", ["human", "codex"])
def test_a_participant_of_kind_human_is_refused_as_a_person_whatever_its_runtime(
    default_team, runtime
):
    hal = registry.create_agent(
        id="hal", display_name="Hal", team="default", runtime=runtime, participant_kind="human"
    )
    with pytest.raises(ValidationFailed) as refused:
        registry.set_reviewer_agent("default", "hal")
    assert "'hal' is a person" in refused.value.detail
    with pytest.raises(HumanParticipantRefused) as fired:
        check_not_human(hal)
    assert "'hal' is a person" in fired.value.detail
