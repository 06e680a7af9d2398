"""An agent's settings are checked when saved for what every run reads: a value no
run could read is refused then (400 naming it), not a crash of each run after its
claim."""

from __future__ import annotations

import pytest

from core import registry
from core.errors import ValidationFailed

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", ["ten minutes", "-1", -5, True, [600]])
def test_an_agent_timeout_s_that_no_run_could_read_is_refused_when_saved(default_team, value):
    # Every run and review reads it as float(timeout_s or the default): such a value
    # was saved, then crashed each run of the agent after its claim.
    with pytest.raises(ValidationFailed) as refused:
        registry.create_agent(
            id="slow",
            display_name="Slow",
            team="default",
            runtime="command",
            settings={"argv": ["true"], "timeout_s": value},
        )
    assert refused.value.field == "settings.timeout_s"
    registry.create_agent(
        id="slow", display_name="Slow", team="default", runtime="command",
        settings={"argv": ["true"], "timeout_s": 600},
    )  # fmt: skip
    with pytest.raises(ValidationFailed):
        registry.update_agent("slow", {"settings": {"argv": ["true"], "timeout_s": value}})
    assert registry.get_agent("slow").settings["timeout_s"] == 600
