"""The README stays short and its commands stay the tested ones (issue 46)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.test_examples import blocks

ROOT = Path(__file__).resolve().parents[2]


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_the_readme_is_short_and_its_two_commands_are_the_tested_ones():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    run, tests, tour = shell_blocks(readme)
    # The run command is the guide's install line, which tests/docs runs.
    guide = blocks("getting-started.md")
    assert run.strip() == next(b.text.strip() for b in guide if b.kind == "install")
    # The test command installs what CI installs, and runs pytest as CI does.
    extras = re.search(r"pip install -q -e '\.\[([\w,]+)\]'", tests).group(1).split(",")
    ci = (ROOT / ".ci" / "run").read_text()
    ci_extras = re.search(r'pip install -q -e "\.\[([\w,]+)\]"', ci).group(1).split(",")
    assert set(extras) <= set(ci_extras)
    assert tests.strip().endswith(".venv/bin/python -m pytest") and "-m pytest" in ci
    # Every line of the tour is a line of the guide's tested examples.
    tested = {line for b in guide if b.kind == "run" for line in b.text.splitlines()}
    assert [line for line in tour.splitlines() if line not in tested] == []
