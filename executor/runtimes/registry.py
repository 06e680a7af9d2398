"""Which adapter serves which runtime name, and when a native session may be resumed."""

from __future__ import annotations

import re

from executor.runtimes.base import Capabilities, RuntimeAdapter
from executor.runtimes.claude_code import ClaudeCodeAdapter
from executor.runtimes.codex import CodexAdapter
from executor.runtimes.command import CommandAdapter
from executor.runtimes.hermes import HermesAdapter
from executor.runtimes.human import HumanAdapter
from executor.runtimes.openclaw import OpenClawAdapter

# Keys are the values of core.models.Runtime (a test keeps them in step).
_ADAPTERS: dict[str, type[RuntimeAdapter]] = {
    "command": CommandAdapter,
    "claude-code": ClaudeCodeAdapter,
    "codex": CodexAdapter,
    "hermes": HermesAdapter,
    "openclaw": OpenClawAdapter,
    "human": HumanAdapter,
}

RUNTIMES: tuple[str, ...] = tuple(_ADAPTERS)


class UnknownRuntime(LookupError):
    """An agent names a runtime no adapter serves."""


def adapter_for(runtime: str) -> RuntimeAdapter:
    """A fresh adapter for ``runtime`` (adapters hold no per-run state)."""
    try:
        adapter_class = _ADAPTERS[runtime]
    except KeyError:
        raise UnknownRuntime(f"unknown runtime {runtime!r}; known: {', '.join(RUNTIMES)}") from None
    return adapter_class()


def capabilities(runtime: str) -> Capabilities:
    try:
        return _ADAPTERS[runtime].capabilities
    except KeyError:
        raise UnknownRuntime(f"unknown runtime {runtime!r}; known: {', '.join(RUNTIMES)}") from None


def resume_id_for(
    runtime: str, handoff_runtime: str | None, native_session_id: str | None
) -> str | None:
    """The native session id to resume with, or None to start fresh.

    A session id means something only to the runtime that issued it: a Codex thread
    id handed to Claude Code would fail (or worse, resume a stranger's session). So
    it is used only when the previous run was the same runtime; across runtimes the
    next run starts fresh and picks up from the handoff file instead.

    Only an id's shape (:data:`SESSION_ID`) is resumed: the id comes from the task's
    handoff, a file in the builder's own checkout, and a runtime may take it as an
    argument of its own (``codex exec … resume <id>``), where an "id" such as
    ``--last`` or ``-csandbox_mode=…`` would be a flag of the builder's choosing
    (GOVERNANCE §6: what runs is an operator's decision). Anything else starts fresh.
    """
    if not native_session_id or not handoff_runtime or handoff_runtime != runtime:
        return None
    if SESSION_ID.fullmatch(native_session_id) is None:
        return None
    return native_session_id


# A runtime's session ids (Claude Code's and Codex's UUIDs, Hermes's stamps, the
# OpenClaw gateway's ``agent:main:…`` keys): never an option, never blank.
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
