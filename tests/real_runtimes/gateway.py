"""A real OpenClaw Gateway process for the tier, and a bare websocket client for it.

The client is the tests' own, written from the recorded frames
(shared/runtimes/openclaw/*.jsonl), so the tier can prove the gateway and its
environment work before the product's gateway client is pointed at it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.exceptions import WebSocketException
from websockets.sync.client import ClientConnection, connect

from tests.real_runtimes.hermetic import (
    GATEWAY_TOKEN,
    Tool,
    descendants,
    kill_group,
    openclaw_config,
    openclaw_env,
    process_group_of,
)

ALL_SCOPES = ["operator.read", "operator.write", "operator.admin"]
READ_WRITE = ["operator.read", "operator.write"]


class GatewayRefused(Exception):
    """The gateway answered a request with ``ok: false``."""

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame
        self.error = frame.get("error") or {}
        super().__init__(f"{self.error.get('code')}: {self.error.get('message')}")


class GatewayClient:
    """One operator connection: ``connect`` handshake, then requests and events."""

    def __init__(
        self,
        url: str,
        *,
        token: str = GATEWAY_TOKEN,
        scopes: list[str] | None = None,
        min_protocol: int = 3,
        max_protocol: int = 4,
        client_id: str = "gateway-client",
        mode: str = "backend",
    ) -> None:
        self.url = url
        self.connect_params = {
            "minProtocol": min_protocol,
            "maxProtocol": max_protocol,
            "client": {"id": client_id, "version": "0.1.0", "platform": "python", "mode": mode},
            "role": "operator",
            "scopes": list(ALL_SCOPES if scopes is None else scopes),
            "caps": [],
            "auth": {"token": token},
        }
        self.events: list[dict[str, Any]] = []
        self.hello: dict[str, Any] = {}
        self._ws: ClientConnection | None = None
        self._stack = contextlib.ExitStack()
        self._ids = itertools.count(1)

    def __enter__(self) -> GatewayClient:
        self._ws = self._stack.enter_context(connect(self.url, open_timeout=10, max_size=None))
        try:
            self.hello = self.request("connect", self.connect_params, timeout_s=20)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._ws = None
        self._stack.close()

    def send(self, method: str, params: dict[str, Any]) -> str:
        assert self._ws is not None
        request_id = f"r{next(self._ids)}"
        self._ws.send(
            json.dumps({"type": "req", "id": request_id, "method": method, "params": params})
        )
        return request_id

    def response(
        self, request_id: str, *, timeout_s: float = 30, skip_accepted: bool = False
    ) -> dict[str, Any]:
        """The ``res`` frame for ``request_id`` (its payload); events are kept meanwhile.

        With ``skip_accepted`` an ``agent`` run's first answer (``status: accepted``)
        is passed over and the final one returned. Raises :class:`GatewayRefused`.
        """
        assert self._ws is not None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no response to {request_id} in {timeout_s}s")
            frame = json.loads(self._ws.recv(timeout=remaining))
            if frame.get("type") == "event":
                self.events.append(frame)
                continue
            if frame.get("type") != "res" or frame.get("id") != request_id:
                continue
            if not frame.get("ok"):
                raise GatewayRefused(frame)
            payload = frame.get("payload") or {}
            if skip_accepted and payload.get("status") == "accepted":
                continue
            return payload

    def request(self, method: str, params: dict[str, Any], *, timeout_s: float = 30) -> Any:
        return self.response(self.send(method, params), timeout_s=timeout_s)

    def lifecycle(self, run_id: str) -> list[dict[str, Any]]:
        """The ``data`` of the run's lifecycle events seen so far."""
        return [
            e["payload"].get("data") or {}
            for e in self.events
            if e.get("event") == "agent"
            and (e.get("payload") or {}).get("runId") == run_id
            and e["payload"].get("stream") == "lifecycle"
        ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class GatewayProcess:
    """``openclaw gateway run`` in its own process group, on a free loopback port."""

    tool: Tool
    root: Path
    model_url_v1: str
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    # The process groups stop() killed, so a test can check that none is left.
    process_groups: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def log_file(self) -> Path:
        return self.root / "gateway.log"

    def start(self) -> GatewayProcess:
        self.port = self.port or free_port()
        for name in ("home", "state", "workspace"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        config_path = self.root / "openclaw.json"
        config = openclaw_config(self.port, self.workspace, self.model_url_v1, self.log_file)
        config_path.write_text(json.dumps(config, indent=1))
        env = openclaw_env(self.root / "home", self.root / "state", config_path)
        out = (self.root / "gateway.stdout").open("wb")
        self.proc = subprocess.Popen(
            [str(self.tool.bin), "gateway", "run"],
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        return self

    def wait_ready(self, deadline_s: float = 120) -> dict[str, Any]:
        """Connect until the handshake succeeds; a starting gateway says UNAVAILABLE."""
        deadline = time.monotonic() + deadline_s
        last: object = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"gateway exited with {self.proc.returncode}: {self.output_tail()}"
                )
            try:
                with GatewayClient(self.url) as client:
                    return client.hello
            except GatewayRefused as exc:
                last = exc
                if not exc.error.get("retryable"):
                    raise
                time.sleep(min(float(exc.error.get("retryAfterMs") or 500) / 1000, 2))
            except (OSError, WebSocketException, TimeoutError) as exc:
                last = exc
                time.sleep(0.25)
        raise RuntimeError(f"gateway not ready in {deadline_s}s ({last}): {self.output_tail()}")

    def output_tail(self, chars: int = 3000) -> str:
        try:
            return (self.root / "gateway.stdout").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGKILL the gateway's group and every group its children lead (the spawn
        broker has one of its own): its SIGTERM drain lasts up to 315 s."""
        if self.proc is None:
            return
        groups = {self.proc.pid}
        for pid in descendants(self.proc.pid):
            group = process_group_of(pid)
            if group is not None:
                groups.add(group)
        for group in groups:
            kill_group(group)
        self.proc.wait(timeout=30)
        self.process_groups = groups
