"""A stand-in for ``claude -p --output-format stream-json``: the wire format of
RUNTIMES.md with the usage the test asks for, and no model behind it.

Flags (the real CLI's own flags are accepted and ignored): ``--turns N`` assistant
messages (0: until killed), ``--every`` seconds apart, each with ``--input-tokens``
and ``--output-tokens``; ``--cost-usd`` per turn puts a ``total_cost_usd`` on the
result line (without it the run is priced from its tokens); ``--model`` names the
model in the init line.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid


def flag(argv: list[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv else default


def main(argv: list[str]) -> int:
    turns = int(flag(argv, "--turns", "1"))
    tokens_in = int(flag(argv, "--input-tokens", "1000"))
    tokens_out = int(flag(argv, "--output-tokens", "10"))
    cost = flag(argv, "--cost-usd", "")
    model = flag(argv, "--model", "claude-opus-5-5")
    every = float(flag(argv, "--every", "0.05" if turns == 0 else "0"))
    session = str(uuid.uuid4())

    def say(event: dict[str, object]) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    say({"type": "system", "subtype": "init", "session_id": session, "model": model})
    pause = threading.Event()  # never set: a pause between turns that SIGTERM ends
    done = 0
    while turns == 0 or done < turns:
        done += 1
        usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
        say(
            {
                "type": "assistant",
                "session_id": session,
                "message": {
                    "id": f"msg_{done}",
                    "model": model,
                    "content": [{"type": "text", "text": f"turn {done}"}],
                    "usage": usage,
                },
            }
        )
        if every:
            pause.wait(every)
    result: dict[str, object] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "session_id": session,
        "result": f"did {done} turns",
        "usage": {"input_tokens": tokens_in * done, "output_tokens": tokens_out * done},
    }
    if cost:
        result["total_cost_usd"] = float(cost) * done
    say(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
