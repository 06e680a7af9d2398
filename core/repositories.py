"""Repositories registered to a team (the only writer of the ``repositories`` table).

A worktree is only ever made inside a registered repository of its task's team.
Staff register repositories; everything else names one by id. A path is taken from
staff alone: :func:`resolve_path` follows symlinks and ``..``, fences the result
with ``CLAWBOO_REPO_ROOTS`` and asks git that it is a repository's top level. A
path from anyone else is only ever compared, as a string, with the paths already
registered for their teams (:func:`registered_path`): nothing about an arbitrary
path (does it exist, is it a repository) shows in the answer.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction

from core import storage
from core.agent_secrets import MASK
from core.checks import check_id, check_text
from core.errors import Conflict, NotFound, ValidationFailed
from core.models import Forge, Repository, Team

EDITABLE = (
    "path",
    "remote",
    "base_branch",
    "landing",
    "landing_mode",
    "install_cmd",
    "verify_cmd",
    "forge",
)
FIELDS = ("id", "team", *EDITABLE)
LANDINGS = ("squash", "merge")


def _choices(model: Any, name: str) -> tuple[str, ...]:
    """The values of a model field's choices (the column's own list)."""
    return tuple(str(value) for value, _ in model._meta.get_field(name).choices or ())


LANDING_MODES = _choices(Repository, "landing_mode")
GIT_TIMEOUT_S = 60
_BRANCH = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._/-]{0,254}\Z")
FORGE_KINDS = _choices(Forge, "kind")
MERGE_METHODS = _choices(Forge, "merge_method")
# The forge's write-only fields: an answer shows MASK in their place; MASK handed
# back keeps the stored value (as agent secrets, core.agent_secrets).
FORGE_SECRETS = ("token", "webhook_secret")
FORGE_KEYS = ("kind", "api_url", "repo", "merge_method", "required_checks", *FORGE_SECRETS)
_FORGE_REPO = re.compile(r"\A[A-Za-z0-9._-]{1,100}/[A-Za-z0-9._-]{1,100}\Z")


def allowed_repo_roots() -> list[Path]:
    return [Path(p).expanduser().resolve() for p in settings.CLAWBOO_REPO_ROOTS]


def check_repo_path(value: Any, field: str = "repo_path") -> Path:
    """An absolute path inside one of ``CLAWBOO_REPO_ROOTS`` (any absolute path
    when the list is empty: a single-user local install), resolved through
    symlinks and ``..`` so neither can smuggle a path out of the allowed roots.

    That the path is a git work tree is checked by the caller with git itself.
    """
    if not isinstance(value, str | Path) or not str(value).strip():
        raise ValidationFailed(field, "is required")
    raw = str(value)
    if "\x00" in raw or "\n" in raw or "\r" in raw:
        raise ValidationFailed(field, "must not contain control characters")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        raise ValidationFailed(field, "must be an absolute path")
    resolved = path.resolve()
    roots = allowed_repo_roots()
    if roots and not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise ValidationFailed(field, "is outside the allowed repository roots")
    if not resolved.is_dir():
        raise ValidationFailed(field, "is not a directory")
    return resolved


def _toplevel(path: Path) -> Path | None:
    """The top level of the git work tree at ``path`` (real path), or None."""
    try:
        proc = subprocess.run(  # noqa: S603 - argv list, fixed git subcommand
            ["git", "rev-parse", "--show-toplevel"],  # noqa: S607 - git from PATH, as worktrees.git
            cwd=path,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip()
    return Path(out).resolve() if proc.returncode == 0 and out else None


def resolve_path(value: Any, field: str = "path") -> Path:
    """The real path of the git repository whose top level ``value`` names (staff
    input only: the answers say what is wrong with the path)."""
    path = check_repo_path(value, field)
    top = _toplevel(path)
    if top is None:
        raise ValidationFailed(field, "is not a git repository work tree")
    if top != path:
        raise ValidationFailed(field, f"is not the top level of its repository ({top})")
    state = Path(settings.CLAWBOO_STATE_DIR).resolve()
    if path == state or path.is_relative_to(state):
        # A Clawboo checkout is not a repository to branch from.
        raise ValidationFailed(field, "is inside the Clawboo state directory")
    return path


def _check_fields(values: dict[str, Any]) -> dict[str, Any]:
    clean: dict[str, Any] = {}
    for name in ("remote", "install_cmd", "verify_cmd"):
        if name in values:
            limit = 1024 if name == "remote" else 4000
            clean[name] = check_text(values[name], name, limit=limit)
    if "base_branch" in values:
        branch = values["base_branch"]
        if branch in (None, ""):
            clean["base_branch"] = ""
        elif not isinstance(branch, str) or not _BRANCH.match(branch) or ".." in branch:
            raise ValidationFailed("base_branch", "must be a branch name")
        else:
            clean["base_branch"] = branch
    if "landing" in values:
        landing = values["landing"]
        if landing in (None, ""):
            clean["landing"] = ""
        elif landing not in LANDINGS:
            raise ValidationFailed("landing", f"must be one of {', '.join(LANDINGS)}")
        else:
            clean["landing"] = landing
    if "landing_mode" in values:
        mode = values["landing_mode"]
        if mode not in LANDING_MODES:
            raise ValidationFailed("landing_mode", f"must be one of {', '.join(LANDING_MODES)}")
        clean["landing_mode"] = mode
    return clean


def check_forge_url(api_url: str | None) -> str:
    """The forge's API address: an http(s) URL with a host (and a valid port), no
    spaces, credentials, query or fragment -- what the client can call as its base.
    Anything else is a 400 now, not a failure of every later call (the poll's, a
    webhook's, an approval's)."""
    refused = ValidationFailed("forge.api_url", "must be an http(s) URL of the forge's API")
    if not api_url or re.search(r"[\s\x00-\x1f\x7f]", api_url):
        raise refused
    try:
        parts = urlsplit(api_url)
        parts.port  # noqa: B018 - raises on a port that is not one
    except ValueError:
        raise refused from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or "@" in parts.netloc
        or parts.query
        or parts.fragment
    ):
        raise refused
    return api_url


def check_forge(value: Any, stored: Forge | None) -> dict[str, Any] | None:
    """A repository's ``forge`` as it will be stored, or None to remove it. A secret
    given as MASK (what an answer showed) keeps the stored one."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationFailed("forge", "must be an object {kind, api_url, repo, token, ...}")
    unknown = sorted(set(value) - set(FORGE_KEYS))
    if unknown:
        raise ValidationFailed(f"forge.{unknown[0]}", "unknown field of a forge")
    kind = value.get("kind")
    if kind not in FORGE_KINDS:
        raise ValidationFailed("forge.kind", f"must be one of {', '.join(FORGE_KINDS)}")
    api_url = check_forge_url(check_text(value.get("api_url"), "forge.api_url", limit=1024))
    repo = value.get("repo")
    if not isinstance(repo, str) or not _FORGE_REPO.match(repo):
        raise ValidationFailed("forge.repo", "must be owner/name")
    method = value.get("merge_method", "merge")
    if method not in MERGE_METHODS:
        raise ValidationFailed("forge.merge_method", f"must be one of {', '.join(MERGE_METHODS)}")
    required = value.get("required_checks", [])
    if not isinstance(required, list) or not all(
        isinstance(n, str) and 0 < len(n) <= 255 for n in required
    ):
        raise ValidationFailed("forge.required_checks", "must be a list of check names")
    clean: dict[str, Any] = {
        "kind": kind,
        "api_url": api_url.rstrip("/"),
        "repo": repo,
        "merge_method": method,
        "required_checks": required[:100],
    }
    for name in FORGE_SECRETS:
        given = value.get(name)
        if given == MASK:
            kept = getattr(stored, name, "") if stored is not None else ""
            if not kept:
                raise ValidationFailed(f"forge.{name}", "is the mask of a secret that is not set")
            if name == "token" and stored is not None and stored.api_url != clean["api_url"]:
                # A kept token goes only where it was sent before: otherwise moving
                # api_url to a server of one's own would read the write-only token.
                raise ValidationFailed(
                    "forge.token",
                    "must be given again when api_url changes (a kept token is never "
                    "sent to a new address)",
                )
            clean[name] = kept
        elif given in (None, ""):
            clean[name] = ""
        else:
            clean[name] = check_text(given, f"forge.{name}", limit=4000)
    if not clean["token"]:
        raise ValidationFailed("forge.token", "is required: the forge's API token")
    return clean


def forge_as_dict(repo: Repository) -> dict[str, Any] | None:
    """The forge of an answer: every field, the secrets as MASK (or null when unset)."""
    forge = Forge.objects.filter(repository_id=repo.pk).first()
    if forge is None:
        return None
    return {
        "kind": forge.kind,
        "api_url": forge.api_url,
        "repo": forge.repo,
        "merge_method": forge.merge_method,
        "required_checks": list(forge.required_checks or []),
        **{name: MASK if getattr(forge, name) else None for name in FORGE_SECRETS},
        "webhook_url": f"/api/repositories/{repo.pk}/forge/webhook",
    }


def forge_of(repo_id: str | None) -> Forge | None:
    """The forge of repository ``repo_id`` (None: it names none)."""
    if not repo_id:
        return None
    return Forge.objects.filter(repository_id=repo_id).first()


def _save_forge(repo: Repository, clean: dict[str, Any] | None) -> None:
    if clean is None:
        Forge.objects.filter(repository_id=repo.pk).delete()
        return
    Forge.objects.update_or_create(repository_id=repo.pk, defaults=clean)


def _free_id(path: Path) -> str:
    """An id made from the directory's name, unused so far."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.name).strip(".-_") or "repo"
    stem = stem[:100]
    candidate, n = stem, 1
    while Repository.objects.filter(pk=candidate).exists():
        n += 1
        candidate = f"{stem}-{n}"
    return candidate


def as_dict(repo: Repository) -> dict[str, Any]:
    return {
        "id": repo.id,
        "team": repo.team_id,
        "path": repo.path,
        "remote": repo.remote,
        "base_branch": repo.base_branch,
        "landing": repo.landing,
        "landing_mode": repo.landing_mode,
        "install_cmd": repo.install_cmd,
        "verify_cmd": repo.verify_cmd,
        "forge": forge_as_dict(repo),
        "created_at": repo.created_at.isoformat(),
        "updated_at": repo.updated_at.isoformat(),
    }


def get_repository(repo_id: str) -> Repository:
    try:
        return Repository.objects.get(pk=repo_id)
    except Repository.DoesNotExist:
        raise NotFound(f"repository {repo_id!r} does not exist") from None


def register(
    *,
    team: Any,
    path: Any,
    id: Any = None,
    **fields: Any,  # noqa: A002 - the API's field name
) -> Repository:
    """Register the repository at ``path`` (staff input) for ``team``."""
    unknown = sorted(set(fields) - set(EDITABLE))
    if unknown:
        raise ValidationFailed(unknown[0], "unknown field of a repository")
    tid = check_id(team, "team")
    rid = None if id is None else check_id(id, "id")
    real = resolve_path(path)
    forge = check_forge(fields.pop("forge", None), None)
    clean = _check_fields(fields)

    def run() -> Repository:
        if not Team.objects.filter(pk=tid).exists():
            raise ValidationFailed("team", f"no team {tid!r}")
        if rid is not None and Repository.objects.filter(pk=rid).exists():
            raise Conflict(f"repository {rid!r} already exists")
        if Repository.objects.filter(team_id=tid, path=str(real)).exists():
            raise Conflict(f"team {tid!r} already has the repository at {real}", field="path")
        try:
            with transaction.atomic():
                repo = Repository.objects.create(
                    id=rid or _free_id(real), team_id=tid, path=str(real), **clean
                )
                _save_forge(repo, forge)
                return repo
        except IntegrityError:  # a concurrent registration took the id or the path
            raise Conflict(f"repository {rid or real} was registered meanwhile") from None

    return storage.write(run)


def update(repo_id: str, changes: dict[str, Any]) -> Repository:
    """Change a repository (staff input; a new path is resolved like a registration)."""
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise ValidationFailed(unknown[0], "unknown field in a repository update")
    changes = dict(changes)
    forge_given = "forge" in changes
    forge_value = changes.pop("forge", None)
    clean = _check_fields(changes)
    if "path" in changes:
        clean["path"] = str(resolve_path(changes["path"]))
    forge = check_forge(forge_value, forge_of(repo_id)) if forge_given else None

    def run() -> Repository:
        repo = get_repository(repo_id)
        if (
            "path" in clean
            and Repository.objects.filter(team_id=repo.team_id, path=clean["path"])
            .exclude(pk=repo.pk)
            .exists()
        ):
            raise Conflict(
                f"team {repo.team_id!r} already has the repository at {clean['path']}",
                field="path",
            )
        for name, value in clean.items():
            setattr(repo, name, value)
        repo.save()
        if forge_given:
            _save_forge(repo, forge)
        return repo

    return storage.write(run)


def delete(repo_id: str) -> None:
    """Forget a repository. Tasks that named it keep their workspaces (which record
    their own path) and name no repository from now on."""

    def run() -> None:
        get_repository(repo_id).delete()

    storage.write(run)


def ensure(team_id: str, path: Any, field: str = "repo_path") -> Repository:
    """The repository of ``team_id`` at ``path`` (staff input), registering it when
    the team has none there yet: how a staff caller's ``repo_path`` keeps working."""
    real = resolve_path(path, field)
    found = Repository.objects.filter(team_id=team_id, path=str(real)).first()
    if found is not None:
        return found

    def run() -> Repository:
        again = Repository.objects.filter(team_id=team_id, path=str(real)).first()
        if again is not None:
            return again
        try:
            with transaction.atomic():  # a savepoint: a racer's insert is not fatal
                return Repository.objects.create(id=_free_id(real), team_id=team_id, path=str(real))
        except IntegrityError:
            # Another caller registered it (or took the id) between our look and insert.
            found = Repository.objects.filter(team_id=team_id, path=str(real)).first()
            if found is None:
                raise Conflict(f"could not register {real}: try again", field=field) from None
            return found

    return storage.write(run)


def registered_path(team_id: str, raw: Any) -> Repository | None:
    """The team's repository whose stored path is exactly ``raw``, or None.

    A string comparison only, never a look at the file system: how a non-staff
    caller's ``repo_path`` is understood without telling them anything about paths
    that are not their team's repositories.
    """
    if not isinstance(raw, str) or not raw:
        return None
    return Repository.objects.filter(team_id=team_id, path=raw).first()


def of_team(repo_id: Any, team_id: str, field: str = "repository") -> Repository:
    """The repository ``repo_id`` if it belongs to ``team_id``; any other id (unknown,
    malformed, another team's) is the same 400 naming ``field``."""
    found = registered(repo_id, team_id) if isinstance(repo_id, str) else None
    if found is not None:
        return found
    raise ValidationFailed(field, f"no repository {repo_id!r} in team {team_id!r}")


def for_real_path(team_id: str, path: Path) -> Repository | None:
    """The team's repository at the real path ``path`` (the worktree wall's check)."""
    return Repository.objects.filter(team_id=team_id, path=str(path)).first()


def check_named_path(team_id: str, raw: Any, field: str) -> Repository:
    """The team's repository a ``repo_path`` in a body names: exactly the stored path
    of one of its registered repositories (a string comparison, nothing else), else
    400 naming ``field``. The data layers' rule for every path they are handed; a
    staff caller's path is first resolved or registered by :func:`ensure`."""
    found = registered_path(team_id, raw)
    if found is None:
        raise ValidationFailed(
            field,
            f"is not a registered repository of team {team_id!r}: name one by id "
            "(`repository`); staff register repositories (/api/repositories, the admin)",
        )
    return found


def registered(repo_id: str, team_id: str) -> Repository | None:
    """The repository ``repo_id`` if it (still) belongs to ``team_id``, else None."""
    return Repository.objects.filter(pk=repo_id, team_id=team_id).first()
