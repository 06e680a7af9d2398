"""The ``clawboo`` console script.

``clawboo`` or ``clawboo up [--host H --port P --no-workers --no-ticker]`` runs the
whole product; any other first word is a Django management command
(``clawboo migrate``, ``clawboo createsuperuser``, ``clawboo ticker`` …).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from core import procs


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (args[0].startswith("-") and args[0] != "--version"):
        args = ["up", *args]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawboo.settings")
    if os.environ.get(procs.ENV_FLAG) == "1":
        procs.forks_die_with_parent()  # started by `clawboo up`: see core.procs
    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(["clawboo", *args])
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # e.g. bad settings, before any command could report it
        text = str(exc).strip().splitlines()
        sys.stderr.write(f"clawboo: {type(exc).__name__}: {text[0] if text else ''}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
