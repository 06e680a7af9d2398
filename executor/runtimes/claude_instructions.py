"""A Claude Code run's project instructions, read from the task's base commit.

``--setting-sources user`` keeps the worktree's settings away from a run (the builder
writes the worktree its next run starts in), and with them the project's
``CLAUDE.md``, which Claude Code loads under the same flag. The adapter gives the
instructions back itself, as the operator committed them: the files Claude Code
reads at the top of its working directory, and the files they import (``@path``),
each read at the base commit with ``git``, never from the checkout.
"""

from __future__ import annotations

import posixpath
import re

from executor.runtimes.base import ProjectBase
from worktrees.git import committed_file

# The project instruction files Claude Code reads at the top of its working
# directory, in its order.
INSTRUCTION_FILES = ("CLAUDE.md", ".claude/CLAUDE.md")
# All of it together. The text is one argv string, and Linux refuses a string over
# 128 KiB (MAX_ARG_STRLEN): this bound and the headings stay under it. (Claude Code
# itself warns about a CLAUDE.md over 40,000 characters.)
INSTRUCTIONS_MAX_BYTES = 96 * 1024
# Claude Code follows imports "with a maximum depth of five hops".
IMPORT_DEPTH = 5
# Each ``@word`` is looked up in the commit (a mention is no file): this many at most.
IMPORTS_MAX = 32

# ``@path`` at the start of a line or after a space; not in code (stripped first).
_IMPORT = re.compile(r"(?:^|(?<=\s))@([^\s`]+)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_FENCE = ("```", "~~~")


def project_instructions(base: ProjectBase) -> str | None:
    """The project's instruction files (and what they import) as the operator
    committed them at ``base``, never the worktree's copies, which the builder may
    have rewritten, as text for ``--append-system-prompt``; None when the commit has
    none. Past :data:`INSTRUCTIONS_MAX_BYTES` in all, a file is cut (and a later one
    left out), with a line saying so. Raises :class:`worktrees.git.GitError` when the
    commit cannot be read."""
    parts: list[str] = []
    left = INSTRUCTIONS_MAX_BYTES
    seen: set[str] = set()
    tried = 0
    # (path, who imported it, depth), depth first as Claude Code inlines an import.
    queue: list[tuple[str, str | None, int]] = [(name, None, 0) for name in INSTRUCTION_FILES]
    while queue:
        name, importer, depth = queue.pop(0)
        found = committed_file(base.repo, base.commit, name, limit=left)
        if found is None or found.path in seen:
            continue
        seen.add(found.path)
        where = f" (imported by {importer})" if importer else ""
        if not found.data and found.size:
            parts.append(f"[{name}{where}: not given, past Clawboo's bound of {left} bytes.]\n")
            continue
        left -= len(found.data)
        # A cut may split a character: drop the partial one rather than garble it.
        text = found.data.decode("utf-8", errors="ignore" if found.cut else "replace")
        shown = name if found.path == name else f"{name} (-> {found.path})"
        part = f"Contents of {shown}{where} at commit {base.commit[:12]}:\n\n{text.rstrip()}\n"
        if found.cut:
            given = len(found.data)
            part += f"\n[{name} is {found.size} bytes; Clawboo gave only its first {given}.]\n"
        parts.append(part)
        if depth < IMPORT_DEPTH:
            paths = imports_of(text, posixpath.dirname(found.path))[: IMPORTS_MAX - tried]
            tried += len(paths)
            queue[:0] = [(path, found.path, depth + 1) for path in paths]
    if not parts:
        return None
    heading = (
        "# The project's instructions\n\n"
        "Instructions checked into this repository (Claude Code's project memory, "
        "read by Clawboo from the task's base commit). Follow them.\n\n"
    )
    return heading + "\n".join(parts)


def imports_of(text: str, directory: str) -> list[str]:
    """The repository paths ``text`` imports (``@path``, relative to ``directory``,
    the importing file's), outside code blocks and spans; a home (``@~/…``) or
    absolute path, or one leaving the repository, is not the commit's to give."""
    paths: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(_FENCE):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in _IMPORT.findall(_CODE_SPAN.sub("", line)):
            if target.startswith(("~", "/")):
                continue
            path = posixpath.normpath(posixpath.join(directory, target))
            if path != ".." and not path.startswith("../") and path not in paths:
                paths.append(path)
    return paths
