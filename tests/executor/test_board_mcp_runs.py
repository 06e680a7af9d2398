"""The executor hands a Hermes run the board's MCP server (a stand-in ``hermes`` on
PATH): a credential minted for this agent and task, in the run's environment and in
the config of the run's own Hermes home; afterwards the credential is revoked and the
home is gone, however the run ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from board import store
from boardmcp import credentials
from boardmcp.models import RunCredential
from core import registry
from executor import runner
from executor.runner import Executor
from tests.runtimes.stand_ins import install_stand_in, kill_if_running, real_lines, real_text

BOARD_URL = "http://127.0.0.1:8000/mcp/"


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}:/usr/bin:/bin")
    return directory


@pytest.fixture
def hermes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user-hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: fake-model\n")
    monkeypatch.setenv("HERMES_HOME", str(home))
    return home


@pytest.fixture
def minted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every credential the executor minted and revoked, in order."""
    calls: list[tuple[str, ...]] = []
    mint, revoke = credentials.mint_run_credential, credentials.revoke_run_credential

    def spy_mint(agent_id: str, task_id: str, ticket: str) -> str:
        key = mint(agent_id, task_id, ticket)
        calls.append(("mint", agent_id, task_id, key))
        return key

    def spy_revoke(key: str) -> None:
        calls.append(("revoke", key))
        revoke(key)

    monkeypatch.setattr(runner.mcp_credentials, "mint_run_credential", spy_mint)
    monkeypatch.setattr(runner.mcp_credentials, "revoke_run_credential", spy_revoke)
    return calls


SCENARIOS: dict[str, dict[str, Any]] = {
    "succeeded": {
        "stdout": real_lines("hermes/run1-oneshot.stdout.txt"),
        "usage_report": real_text("hermes/run1-oneshot.usage.json"),
    },
    "failed": {
        "stdout": real_lines("hermes/run3-auth-401.stdout.txt"),
        "usage_report": real_text("hermes/run3-auth-401.usage.json"),
    },
    "timed_out": {"hang": True},
}


@pytest.mark.django_db
@pytest.mark.parametrize("outcome", sorted(SCENARIOS))
def test_a_hermes_run_gets_the_board_with_its_own_credential_revoked_when_it_ends(
    outcome: str,
    repo: Path,
    bin_dir: Path,
    hermes_home: Path,
    minted: list[tuple[str, ...]],
    settings: Any,
) -> None:
    settings.CLAWBOO_MCP_URL = BOARD_URL
    hermes = install_stand_in(
        bin_dir, "hermes", snapshot_dirs=("HERMES_HOME",), **SCENARIOS[outcome]
    )
    registry.create_agent(
        id="herm",
        display_name="Herm",
        team="default",
        runtime="hermes",
        settings={"repo_path": str(repo), "timeout_s": 2},
    )
    task_id = store.create_task(title="Say hello").task.id

    try:
        report = Executor("herm").work_once()
    finally:
        if outcome == "timed_out":
            kill_if_running(hermes.grandchild_pid())

    assert report.outcome == outcome, report.error
    (_, agent_id, minted_for, key), revoked = minted
    assert (agent_id, minted_for) == ("herm", task_id)
    assert revoked == ("revoke", key)
    assert not RunCredential.objects.exists()
    call = hermes.call()
    assert call["env"]["CLAWBOO_MCP_TOKEN"] == key
    assert call["env"]["CLAWBOO_MCP_URL"] == BOARD_URL
    config = yaml.safe_load(call["dirs"]["HERMES_HOME"]["entries"]["config.yaml"]["text"])
    assert config["mcp_servers"]["clawboo"]["url"] == BOARD_URL
    assert config["model"] == {"default": "fake-model"}
    assert not Path(call["env"]["HERMES_HOME"]).exists()
    # The prompt tells the model the board is at hand.
    assert "MCP server `clawboo`" in call["argv"][1]


@pytest.mark.django_db
def test_without_a_board_url_a_hermes_run_gets_no_credential(
    repo: Path, bin_dir: Path, hermes_home: Path, minted: list[tuple[str, ...]], settings: Any
) -> None:
    settings.CLAWBOO_MCP_URL = ""
    hermes = install_stand_in(bin_dir, "hermes", **SCENARIOS["succeeded"])
    registry.create_agent(
        id="herm",
        display_name="Herm",
        team="default",
        runtime="hermes",
        settings={"repo_path": str(repo)},
    )
    store.create_task(title="Say hello")

    assert Executor("herm").work_once().outcome == "succeeded"
    assert minted == []
    env = hermes.call()["env"]
    assert "CLAWBOO_MCP_TOKEN" not in env and env["HERMES_HOME"] == str(hermes_home)
