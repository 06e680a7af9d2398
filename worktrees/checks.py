"""Input checks for everything that ends up on a git command line or a path.

Each returns the clean value or raises :class:`ValidationFailed` naming the field,
before any git process starts. Refs are checked against a deliberately narrow
allow-list (stricter than ``git check-ref-format``): nothing that could be read
as an option, a revision expression, a path escape or shell syntax.
"""

from __future__ import annotations

import re
from typing import Any

from board.checks import check_id
from core.errors import ValidationFailed
from core.repositories import allowed_repo_roots, check_repo_path

__all__ = [
    "allowed_repo_roots",
    "check_base_ref",
    "check_base_sha",
    "check_id",
    "check_repo_path",
    "check_task_id",
]

REF_MAX = 255
_REF_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._/-]*\Z")
_SHA_PATTERN = re.compile(r"\A[0-9a-fA-F]{4,64}\Z")


def check_task_id(value: Any) -> str:
    """SPEC §10's id rule (it also keeps the branch and directory names safe)."""
    return check_id(value, "task_id")


def check_base_ref(value: Any) -> str:
    """A branch or tag name: letters, digits, ``. _ - /``; no ``..``, no leading
    ``-``/``/``, no ``//``, no trailing ``/``, ``.`` or ``.lock``."""
    detail = (
        "must be a branch or tag name of letters, digits, '.', '_', '-' and '/' "
        "(starting with a letter or digit; no '..', '//', '@{', spaces or shell characters)"
    )
    if not isinstance(value, str) or not 1 <= len(value) <= REF_MAX:
        raise ValidationFailed("base_ref", detail)
    if not _REF_PATTERN.match(value) or ".." in value or "//" in value:
        raise ValidationFailed("base_ref", detail)
    if value.endswith(("/", ".", ".lock")) or "/." in value:
        raise ValidationFailed("base_ref", detail)
    return value


def check_base_sha(value: Any) -> str:
    if not isinstance(value, str) or not _SHA_PATTERN.match(value):
        raise ValidationFailed("base_sha", "must be a commit SHA (4-64 hexadecimal characters)")
    return value.lower()
