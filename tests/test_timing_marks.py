"""A test that holds a clock reading to a few seconds is marked ``timing``.

CI runs each pass on two xdist workers, four test processes on two cores, and the
tests marked ``timing`` after them, one process per backend (``.ci/run``): a bound of a
second or two measures the path only on a machine no busier than that. A bound of
several times what the path needs (a deadline "not 2 s per byte" checked at 5 s) holds
beside the others and needs no mark.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCKS = ("monotonic()", "perf_counter()")
# The widest bound, in seconds, that a loaded machine can break by itself.
TIGHT_S = 3


def tight_bounds(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Lines of ``assert … < N`` / ``<= N`` with 0 < N <= TIGHT_S in ``function``."""
    lines = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Assert):
            continue
        for compare in ast.walk(node.test):
            if not isinstance(compare, ast.Compare):
                continue
            if not any(isinstance(op, ast.Lt | ast.LtE) for op in compare.ops):
                continue
            if any(
                isinstance(c, ast.Constant)
                and isinstance(c.value, int | float)
                and not isinstance(c.value, bool)
                and 0 < c.value <= TIGHT_S
                for c in compare.comparators
            ):
                lines.append(node.lineno)
    return lines


def unmarked_clock_bounds(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("test_*.py")):
        if "bench" in path.relative_to(root).parts:
            continue  # benchmarks measure; their bounds are their subject
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if not node.name.startswith("test_"):
                continue
            if any("timing" in ast.unparse(d) for d in node.decorator_list):
                continue
            if not any(clock in ast.unparse(node) for clock in CLOCKS):
                continue
            for line in tight_bounds(node):
                found.append(f"{path.relative_to(root.parent)}:{line} {node.name}")
    return found


def test_every_test_holding_a_clock_to_a_few_seconds_is_marked_timing():
    assert unmarked_clock_bounds(TESTS) == []


def test_the_check_finds_an_unmarked_bound_and_passes_a_marked_one(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text(
        "import time\n"
        "import pytest\n\n"
        "def test_fast():\n"
        "    started = time.monotonic()\n"
        "    assert time.monotonic() - started < 1.0\n\n"
        "@pytest.mark.timing\n"
        "def test_marked():\n"
        "    started = time.monotonic()\n"
        "    assert time.monotonic() - started < 1.0\n\n"
        "def test_roomy():\n"
        "    started = time.monotonic()\n"
        "    assert time.monotonic() - started < 30\n"
    )
    assert unmarked_clock_bounds(tests) == ["tests/test_x.py:6 test_fast"]
