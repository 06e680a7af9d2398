"""The ``hermes`` runtime: ``hermes -z <prompt> --usage-file PATH`` (one-shot mode).

In ``-z`` mode stdout is the final answer only, so the exit code decides and the
whole stdout is the summary. Tokens, cost and the session id come from the JSON
usage report Hermes writes to ``--usage-file`` -- read after exit, from a scratch
directory outside the worktree. The report's exact shape is not pinned down in
RUNTIMES.md, so it is read defensively: common key spellings, top level or under
``usage``; anything missing stays None.

Settings: ``model``, ``provider``, ``toolsets`` (list or "a,b"), ``extra_args``,
``binary``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from executor.runtimes.base import RunRequest, as_count, prompt_argument, usd_to_cents
from executor.runtimes.oneshot import LineParser, OneShotCliAdapter, setting_list, setting_str

USAGE_FILE = "usage.json"
# The final answer is kept whole up to this size; beyond it only the start is kept.
SUMMARY_CHARS = 20_000

_INPUT_KEYS = ("input_tokens", "prompt_tokens", "total_input_tokens")
_OUTPUT_KEYS = ("output_tokens", "completion_tokens", "total_output_tokens")
_COST_KEYS = ("total_cost_usd", "cost_usd", "estimated_cost_usd")
_SESSION_KEYS = ("session_id", "sessionId", "session")


class HermesOutputParser(LineParser):
    """Collects stdout (the final text) as the summary."""

    def __init__(self) -> None:
        super().__init__()
        self._chars = 0
        self._lines: list[str] = []

    def feed(self, line: str) -> None:
        if self._chars >= SUMMARY_CHARS:
            return
        self._lines.append(line)
        self._chars += len(line) + 1
        self.parsed.summary = "\n".join(self._lines).strip()[:SUMMARY_CHARS]

    def read_usage(self, report: object) -> None:
        """Fill tokens, cost and session id from the parsed usage report."""
        if not isinstance(report, dict):
            return
        nested = report.get("usage")
        sources: list[dict[str, Any]] = [report] + ([nested] if isinstance(nested, dict) else [])
        for source in sources:
            tokens_in = _first(source, _INPUT_KEYS)
            if tokens_in is not None:
                self.parsed.tokens_in = as_count(tokens_in)
            tokens_out = _first(source, _OUTPUT_KEYS)
            if tokens_out is not None:
                self.parsed.tokens_out = as_count(tokens_out)
            cost = usd_to_cents(_first(source, _COST_KEYS))
            if cost is not None:
                self.parsed.cost_cents = cost
            session = _first(source, _SESSION_KEYS)
            if isinstance(session, str) and session:
                self.parsed.native_session_id = session


def _first(source: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in source:
            return source[key]
    return None


class HermesAdapter(OneShotCliAdapter):
    runtime = "hermes"
    binary = "hermes"
    requires_verdict = False

    def build_argv(self, request: RunRequest, executable: str, scratch: Path) -> list[str]:
        settings = request.settings
        argv = [executable, "-z", prompt_argument(request.prompt)]
        argv += ["--usage-file", str(scratch / USAGE_FILE)]
        model = setting_str(settings, "model")
        if model is not None:
            argv += ["--model", model]
        provider = setting_str(settings, "provider")
        if provider is not None:
            argv += ["--provider", provider]
        toolsets = setting_list(settings, "toolsets", comma_separated=True)
        if toolsets:
            argv += ["--toolsets", ",".join(toolsets)]
        if request.resume_session_id:
            # The equals form, so an id starting with "-" is not read as a flag.
            argv.append(f"--resume={request.resume_session_id}")
        argv += setting_list(settings, "extra_args")
        return argv

    def new_parser(self, request: RunRequest) -> LineParser:
        return HermesOutputParser()

    def after_exit(self, request: RunRequest, parser: LineParser, scratch: Path) -> None:
        assert isinstance(parser, HermesOutputParser)
        try:
            report = json.loads((scratch / USAGE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return  # no report (killed, older version): usage stays unknown
        parser.read_usage(report)
