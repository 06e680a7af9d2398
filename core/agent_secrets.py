"""Secret agent settings: written, never read back.

One rule for what is a secret: a settings key that looks like one
(:data:`SECRET_KEY_PATTERN`, at any depth), a key the agent's runtime adapter
declares (:data:`RUNTIME_SECRET_SETTINGS`), or one the operator lists in
``CLAWBOO_SECRET_SETTINGS``. The API, the admin, export and the CLI's output show a
secret's place, never its value (:func:`masked`, :func:`without_secrets`); a write
that hands the placeholder back keeps the stored value (:func:`keep_stored`), so a
read-edit-write round trip never loses, or reveals, a secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings

from core.errors import ValidationFailed

SECRET_KEY_PATTERN = re.compile(r"secret|token|passw|api[_-]?key|credential|auth", re.I)
# What an answer carries in place of a secret's value; handed back, it means "keep it".
MASK = "********"
# Settings keys a runtime's adapter reads as secrets though their names do not say so
# (executor.runtimes: each adapter's ``secret_settings`` is its entry here). The
# foundation holds the table so every floor that shows an agent can apply it.
RUNTIME_SECRET_SETTINGS: dict[str, frozenset[str]] = {
    # An OpenClaw session key addresses a live session on the gateway: whoever holds
    # it can talk into that session.
    "openclaw": frozenset({"session_key"}),
}


def secret_settings_of(runtime: str | None) -> frozenset[str]:
    declared = RUNTIME_SECRET_SETTINGS.get(runtime or "", frozenset())
    extra = frozenset(django_settings.CLAWBOO_SECRET_SETTINGS)
    return declared | extra


def is_secret_key(key: Any, runtime: str | None = None) -> bool:
    name = str(key)
    return bool(SECRET_KEY_PATTERN.search(name)) or name in secret_settings_of(runtime)


def masked(value: Any, runtime: str | None = None) -> Any:
    """``value`` with every secret's value replaced by :data:`MASK` (an empty or null
    one stays as it is: that no secret is set is not a secret)."""
    if isinstance(value, Mapping):
        return {
            key: (
                MASK
                if is_secret_key(key, runtime) and item not in (None, "")
                else masked(item, runtime)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [masked(item, runtime) for item in value]
    return value


def secret_paths(value: Any, runtime: str | None = None, path: str = "settings") -> list[str]:
    """Where ``value`` holds a secret with a value (``settings.api_key``)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if is_secret_key(key, runtime) and item not in (None, ""):
                found.append(f"{path}.{key}")
            else:
                found += secret_paths(item, runtime, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += secret_paths(item, runtime, f"{path}[{index}]")
    return found


def without_secrets(
    value: Any, runtime: str | None = None, path: str = "settings"
) -> tuple[Any, list[str]]:
    """``value`` with every secret key removed, and where they were (export)."""
    if isinstance(value, Mapping):
        kept, dropped = {}, []
        for key, item in value.items():
            if is_secret_key(key, runtime):
                dropped.append(f"{path}.{key}")
                continue
            kept[key], inner = without_secrets(item, runtime, f"{path}.{key}")
            dropped += inner
        return kept, dropped
    if isinstance(value, list):
        items, dropped = [], []
        for index, item in enumerate(value):
            kept_item, inner = without_secrets(item, runtime, f"{path}[{index}]")
            items.append(kept_item)
            dropped += inner
        return items, dropped
    return value, []


def keep_stored(new: Any, stored: Any, runtime: str | None = None, path: str = "settings") -> Any:
    """``new`` with each :data:`MASK` at a secret key replaced by the stored value
    there. A placeholder with nothing stored behind it is refused (400 naming it):
    the mask is never saved as if it were the secret."""
    if isinstance(new, Mapping):
        old = stored if isinstance(stored, Mapping) else {}
        out: dict[str, Any] = {}
        for key, item in new.items():
            where = f"{path}.{key}"
            if item == MASK and is_secret_key(key, runtime):
                if old.get(key) in (None, ""):
                    raise ValidationFailed(where, "is the mask of a secret that is not set")
                out[key] = old[key]
            else:
                out[key] = keep_stored(item, old.get(key), runtime, where)
        return out
    if isinstance(new, list):
        old_list = stored if isinstance(stored, list) else []
        return [
            keep_stored(item, old_list[i] if i < len(old_list) else None, runtime, f"{path}[{i}]")
            for i, item in enumerate(new)
        ]
    return new
