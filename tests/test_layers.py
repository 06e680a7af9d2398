"""The house's floors: each package imports only packages on its own floor or below.

core (foundation) < board, worktrees < boardmcp (the agents' MCP tools) < executor <
routines < ops < clawboo (the roof).
Read from the source with ``ast`` (every import, at module level or inside a
function), so a lazy import cannot hide an arrow running back up.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = {
    "core": 0,
    "board": 1,
    "worktrees": 2,
    "boardmcp": 3,
    "executor": 4,
    "routines": 5,
    "ops": 6,
    "clawboo": 7,
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & FLOOR.keys()


def _arrows() -> list[tuple[str, str, str]]:
    arrows = []
    for package in FLOOR:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for target in _imports(path):
                if target != package:
                    arrows.append((package, target, str(path.relative_to(ROOT))))
    return arrows


def test_no_package_imports_a_package_on_a_higher_floor() -> None:
    upward = [
        f"{where}: {package} imports {target}"
        for package, target, where in _arrows()
        if FLOOR[target] > FLOOR[package]
    ]
    assert upward == []


def test_packages_on_one_floor_do_not_import_each_other_both_ways() -> None:
    pairs = {(package, target) for package, target, _ in _arrows()}
    assert [pair for pair in pairs if pair[::-1] in pairs] == []
