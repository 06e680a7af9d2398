"""Figures the docs state are the code's, not typed from memory (issue 46): the MCP
tools the agents page names and counts. (The migration count and the boot lines are
checked by tests/docs/test_examples.py, against a real ``clawboo up``.)"""

from __future__ import annotations

import re
from pathlib import Path

from boardmcp.tools import TOOLS

DOCS = Path(__file__).resolve().parents[2] / "docs"
WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen \
fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()


def test_the_agents_page_names_and_counts_every_mcp_tool():
    text = (DOCS / "agents.md").read_text()
    found = re.search(
        r"(\w+) tools, each a thin call\s+into the board's data layer: (.*?)\. ", text, re.S
    )
    assert found, "the MCP paragraph of docs/agents.md"
    count, listed = found.group(1).lower(), found.group(2)
    names = [fn.__name__ for fn, _ in TOOLS]
    assert count == WORDS[len(names)], (count, len(names))
    assert re.findall(r"`(\w+)`", listed) == names
