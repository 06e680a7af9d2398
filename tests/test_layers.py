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


# The executor's two run loops stay readable: each module under 400 lines, and no
# function of the executor over 60 (a rule that grows a loop goes where it belongs:
# executor.settle, executor.preflight, executor.rest).
LINES_MAX = {"executor/runner.py": 400, "executor/remote.py": 400}
FUNCTION_LINES_MAX = 60


def test_the_executors_run_loops_stay_short() -> None:
    sizes = {name: len((ROOT / name).read_text().splitlines()) for name in LINES_MAX}
    assert all(sizes[name] < most for name, most in LINES_MAX.items()), sizes
    too_long = []
    for path in sorted((ROOT / "executor").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES_MAX:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.name} ({lines})")
    assert too_long == [], too_long
