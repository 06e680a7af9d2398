"""What runs on this server is an operator's decision.

An agent on any runtime but ``human`` makes the server (or its OpenClaw gateway)
run something chosen by its runtime and settings: a ``command`` argv, a CLI's
binary, flags and permission mode. A task's ``install_cmd`` / ``verify_cmd`` /
``start_cmd`` become ``init.sh`` lines the verification gate runs. Staff decide
these; anyone else may register only what the operator allowlisted in settings
(``CLAWBOO_AGENT_ALLOWLIST``, ``CLAWBOO_TASK_COMMAND_ALLOWLIST``).

An operator's save (a staff user over the API or in the admin, or the CLI) stamps
the agent with the fingerprint of its runtime and settings;
the executor calls :func:`agent_run_refusal` before each run, so an agent whose
row changed since (by any path) runs only if what it now holds is allowlisted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings

from core import repositories, roles
from core.errors import Forbidden
from core.models import Repository
from core.roles import staff_power

# Settings that never reach a command line or an environment. ``repository`` picks
# one of the team's registered repositories (staff registered them; core.registry
# checks the team), so choosing among them is not an operator's decision.
PASSIVE_SETTINGS = frozenset({"timeout_s", "repository"})
# The one runtime nothing on the server runs: a person, or a process that talks
# to the API with its own credential.
SERVERLESS_RUNTIMES = frozenset({"human"})
TASK_COMMAND_KEYS = ("install_cmd", "verify_cmd", "start_cmd")


def runs_on_server(runtime: str) -> bool:
    return runtime not in SERVERLESS_RUNTIMES


def never_run(agent: Any) -> str | None:
    """Why a run the server starts by itself -- a routine's fire, the critic's review
    -- can never be ``agent``'s, or None; the sentence names what it is. A person
    (participant kind ``human``) is never run. Runtime ``human`` runs nothing here:
    it is a person's runtime, or an outside agent's that acts through the API with
    its own key -- which is the agent side (GOVERNANCE §6), not a person, and is not
    called one."""
    if agent.participant_kind == "human":
        return f"{agent.id!r} is a person"
    if not runs_on_server(agent.runtime):
        return (
            f"{agent.id!r} runs nothing on this server (runtime 'human': a person, or an "
            "outside agent that acts through the API itself)"
        )
    return None


def execution_part(runtime: str, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The runtime and the settings that decide what runs."""
    conf = {k: v for k, v in (settings or {}).items() if k not in PASSIVE_SETTINGS}
    return {"runtime": runtime, "settings": conf}


def fingerprint(runtime: str, settings: Mapping[str, Any] | None) -> str:
    text = json.dumps(execution_part(runtime, settings), sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def agent_allowlisted(runtime: str, settings: Mapping[str, Any] | None) -> bool:
    wanted = execution_part(runtime, settings)
    for entry in django_settings.CLAWBOO_AGENT_ALLOWLIST:
        # settings.py refused any entry that is not an object at startup.
        assert isinstance(entry, dict)
        if execution_part(entry.get("runtime", ""), entry.get("settings")) == wanted:
            return True
    return False


def check_agent_execution(
    runtime: str, settings: Mapping[str, Any] | None, *, operator: bool
) -> None:
    """Refuse (403) a non-operator's agent that would run something not allowlisted."""
    if operator or not runs_on_server(runtime) or agent_allowlisted(runtime, settings):
        return
    raise Forbidden(
        f"what a {runtime!r} agent runs on the server is an operator's decision: ask a staff "
        "user to register it, or to allowlist these settings (CLAWBOO_AGENT_ALLOWLIST)",
        field="settings",
    )


def agent_run_refusal(agent: Any) -> str | None:
    """Why the executor must not run ``agent`` now, or None. Re-checked before each run."""
    if not runs_on_server(agent.runtime) or agent_allowlisted(agent.runtime, agent.settings):
        return None
    if agent.approved_fingerprint and agent.approved_fingerprint == fingerprint(
        agent.runtime, agent.settings
    ):
        return None
    return (
        f"agent {agent.id!r}: its runtime and settings were not approved by an operator "
        "(a staff user saves the agent, or CLAWBOO_AGENT_ALLOWLIST lists its settings)"
    )


# What a task's commands override are its repository's install and verify commands:
# whoever may set what the gate runs for one task needs what editing those does (the
# repository's row in the roles table: clawboo.change_repository), not merely the
# right to file or edit tasks.
SET_COMMANDS = "PATCH /api/repositories/{repo_id}"


def check_task_commands(
    metadata: Any, user: Any, *, before: Mapping[str, Any] | None = None
) -> None:
    """Refuse (403) task metadata (or a routine's template) naming commands the gate
    would run that ``user`` may not choose: an operator holding
    :data:`SET_COMMANDS`'s permission may name any, anyone else only allowlisted ones
    (``CLAWBOO_TASK_COMMAND_ALLOWLIST``). A command equal to the one ``before`` held
    is no choice (an edit that re-sends what a task already has)."""
    if not isinstance(metadata, Mapping):
        return
    allowed = set(django_settings.CLAWBOO_TASK_COMMAND_ALLOWLIST)
    operator = is_operator(user)
    for key in TASK_COMMAND_KEYS:
        value = metadata.get(key)
        if value in (None, "") or (isinstance(value, str) and value in allowed):
            continue
        if before is not None and before.get(key) == value:
            continue
        if not operator:
            raise Forbidden(
                f"metadata.{key}: a command the server runs is an operator's decision; ask "
                "a staff user, or to allowlist it (CLAWBOO_TASK_COMMAND_ALLOWLIST)",
                field=f"metadata.{key}",
            )
        if not roles.holds(user, SET_COMMANDS):
            row = roles.TABLE[SET_COMMANDS]
            raise Forbidden(
                f"metadata.{key}: a command the server runs needs the {row.permission} "
                f"permission on {row.model} ({row.django_permission}), as a repository's "
                "own commands do: ask who holds it, or to allowlist it "
                "(CLAWBOO_TASK_COMMAND_ALLOWLIST)",
                field=f"metadata.{key}",
                permission=row.django_permission,
            )


def is_operator(user: Any) -> bool:
    """A staff person with their own credential, holding staff's powers for this
    request (core.roles.staff_power: the write's model permission too): a staff
    owner's agent key or run credential is the agent side, and what the server runs
    is never its decision."""
    return staff_power(user)


# Registering a repository, as its row in the roles table names it: a staff caller's
# ``repo_path`` elsewhere (a task, its checkout, a routine's template) registers one
# only with what this row asks (clawboo.add_repository).
REGISTER_REPOSITORY = "POST /api/repositories"


def repository_at(user: Any, team_id: str, raw: Any, field: str) -> Repository:
    """The team's repository a caller's ``repo_path`` names.

    An operator's path is resolved, and registered when the team has none there yet
    (how a staff caller's path keeps working) -- if they may register a repository
    (:data:`REGISTER_REPOSITORY`): staff granted ``add`` on tasks or routines but not
    on repositories name a registered path only, and an unregistered one is ``403``
    naming the permission, nothing written (the admin refuses them the same row).
    Anyone else's path is compared as a string with the registered ones (400)."""
    if not is_operator(user):
        return repositories.check_named_path(team_id, raw, field)
    if roles.holds(user, REGISTER_REPOSITORY):
        return repositories.ensure(team_id, raw, field)
    found = repositories.registered_path(team_id, raw)
    if found is not None:
        return found
    row = roles.TABLE[REGISTER_REPOSITORY]
    raise Forbidden(
        f"{field}: {raw!r} is not a registered repository of team {team_id!r}, and "
        f"registering one needs the {row.permission} permission on {row.model} "
        f"({row.django_permission}): name a registered one, or ask who holds it",
        field=field,
        permission=row.django_permission,
    )
