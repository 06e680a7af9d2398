"""``/ws/board/?team=T``: every committed board change, in order, with no gap.

On connect the server says ``hello`` with the team's latest sequence. A client
that sends ``{"type": "since", "seq": N}`` first receives every event after N from
the durable log, then live ones — or, when the log no longer holds them (pruned,
:mod:`core.retention`), a ``reload`` frame and live ones from there. Live frames
can reach this process out of order (several servers commit concurrently); the
consumer delivers strictly in sequence order, filling any gap from the log and
dropping duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import connection

from core import events, runlogs, wakeups
from core.checks import ID_PATTERN
from core.live import frames_for, group_name, message_for

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
REPLAY_BATCH = 500
SEQ_MAX = 2**62  # sequences are BIGINT
# A channel layer may drop frames when a client's queue is full, and with no shared
# layer (the default: no Redis) a change another process wrote (a worker, the
# cluster) reaches no layer of this one. The log's head (one look per team and
# process, see _TeamTail) delivers both: looked at when the database says it changed
# (core.wakeups: an in-memory counter read every TAIL_WAKE_SECONDS, no query), and
# every TAIL_CHECK_SECONDS whatever it says.
TAIL_CHECK_SECONDS = 3.0
TAIL_WAKE_SECONDS = 0.1
# On PostgreSQL the database says so only for changes that may free work (a NOTIFY
# makes notifying commits take turns, so a claim, a comment or a run's step sends
# none), while SQLite sees every commit. With no shared layer to bring those live,
# the look there comes this often: a read of one row per watched team.
TAIL_QUIET_CHECK_SECONDS = 0.25
# A look that finds clients behind the head gives the live frames this long to land
# (a commit is seen here as soon as the layer hears of it) before it sends the
# missing ones from the log itself. Without a shared layer a frame another process
# wrote never comes live, and this process's own are already on the layer when their
# commit is seen: no grace then.
TAIL_GRACE_SECONDS = 0.25


@database_sync_to_async
def _tail_timing() -> tuple[float, float]:
    """How often a tail looks at the log's head whatever the wakes say, and how long
    it leaves live frames to land: both depend on the layer and the database."""
    layer = get_channel_layer()
    if layer is not None and not isinstance(layer, InMemoryChannelLayer):
        return TAIL_CHECK_SECONDS, TAIL_GRACE_SECONDS
    if connection.vendor == "postgresql":
        return TAIL_QUIET_CHECK_SECONDS, 0.0
    return TAIL_CHECK_SECONDS, 0.0


# Live frames reach a process's consumers of one team through one channel of the
# layer (see _TeamTail.relay). A connect waits at most this long for it to join the
# team's group (the tail delivers if it cannot); a relay that lost the layer retries
# after RELAY_RETRY_SECONDS; and it joins the group again every RELAY_REJOIN_SECONDS,
# because the in-memory layer forgets a member after its group_expiry (a day).
RELAY_JOIN_SECONDS = 5.0
# The relay lets the server write out what it has sent after this many sockets, so
# the first clients' frames leave while the rest are still being framed.
RELAY_BATCH = 50
RELAY_RETRY_SECONDS = 1.0
RELAY_REJOIN_SECONDS = 3600.0
# Open board sockets of this process, by team (the websocket-clients gauge of /metrics).
connected: Counter[str] = Counter()


@database_sync_to_async
def _can_see(user: Any, team_id: str) -> bool:
    from core.api.access import can_see_team
    from core.checks import ID_PATTERN
    from core.models import Team

    if not ID_PATTERN.match(team_id):  # before the query: a NUL would break it
        return False
    return Team.objects.filter(pk=team_id).exists() and can_see_team(user, team_id)


# How often an open socket's credential is looked at again: a machine token revoked,
# an agent's key deleted, a session signed out, or a team left meanwhile closes the
# socket (4401, 4403) at the next look, rather than leaving it the team's board for
# as long as it stays open (GOVERNANCE §6). One look per socket this often.
STANDING_CHECK_SECONDS = 30.0


@database_sync_to_async
def _standing(scope: dict[str, Any], team_id: str) -> int | None:
    """None while the socket's credential still names a user who sees ``team_id``;
    else the close code to end it with."""
    from core.ws_auth import still_standing

    user = still_standing(scope)
    if user is None:
        return CLOSE_UNAUTHENTICATED
    from core.api.access import can_see_team

    return None if can_see_team(user, team_id) else CLOSE_FORBIDDEN


@database_sync_to_async
def _latest(team_id: str) -> int:
    return events.latest_seq(team_id)


@database_sync_to_async
def _replay_gap(team_id: str, seq: int) -> int | None:
    return events.replay_gap(team_id, seq)


@database_sync_to_async
def _events_after(
    team_id: str, seq: int, upto: int | None = None
) -> list[tuple[int, list[dict[str, Any]]]]:
    rows = events.since(team_id, seq, limit=REPLAY_BATCH)
    return [(e.seq, frames_for(e)) for e in rows if upto is None or e.seq <= upto]


@database_sync_to_async
def _messages_after(team_id: str, seq: int, upto: int) -> list[dict[str, Any]]:
    return [message_for(e) for e in events.since(team_id, seq, limit=REPLAY_BATCH) if e.seq <= upto]


# Watching a run's output: how often its log is looked at, the most sent a look,
# and how far behind a client may fall before it skips ahead.
LOG_POLL_SECONDS = 0.1
LOG_CHUNK = 64 * 1024
LOG_BEHIND_MAX = 1024 * 1024


class _TeamTail:
    """This process's consumers of one team (on one event loop), the one channel of
    the layer their live frames arrive on, and the one look at the team's log head
    that serves them all: a consumer behind the head catches up from the log. One
    query per team, not per client, made when a write to the board has committed in
    any process, or TAIL_CHECK_SECONDS after the last."""

    def __init__(self, team: str) -> None:
        self.team = team
        self.consumers: set[BoardConsumer] = set()
        self.task: asyncio.Task[None] | None = None
        self.relay_task: asyncio.Task[None] | None = None
        self.joined = asyncio.Event()
        self.late: set[asyncio.Task[None]] = set()

    async def watch(self) -> None:
        loop = asyncio.get_running_loop()
        changes = wakeups.seen(wakeups.BOARD)
        looked = loop.time()
        check_every, grace = await _tail_timing()
        while True:
            await asyncio.sleep(TAIL_WAKE_SECONDS)
            now = wakeups.seen(wakeups.BOARD)
            if now == changes and loop.time() - looked < check_every:
                continue
            changes, looked = now, loop.time()
            try:
                head = await _latest(self.team)
                if any(c.pending is None and head > c.last_seq for c in self.consumers):
                    if grace:
                        await asyncio.sleep(grace)
                    await self.catch_up(head)
            except Exception:  # the next look tries again; live frames go on meanwhile
                log.exception("could not check the log head of team %s", self.team)

    async def catch_up(self, head: int) -> None:
        """Send every consumer still behind ``head`` what it missed: one read of the
        log for all of them (from the furthest behind), not one per client."""
        behind = [c for c in self.consumers if c.pending is None and head > c.last_seq]
        if not behind:
            return
        missed = await _messages_after(self.team, min(c.last_seq for c in behind), head)
        await asyncio.gather(*(c.take_missed(missed, head) for c in behind))

    async def relay(self) -> None:
        """Receive the team's live frames once for the whole process and hand each to
        every consumer. A channel per client would make the layer queue, wake and
        decode every change once per client (and open a Redis subscription each),
        where the frames' text is already the same for all of them."""
        layer = get_channel_layer()
        if layer is None:
            self.joined.set()
            return
        loop = asyncio.get_running_loop()
        group = group_name(self.team)
        while True:
            channel = None
            try:
                channel = await layer.new_channel()
                await layer.group_add(group, channel)
                self.joined.set()
                rejoined = loop.time()
                while True:
                    message = await layer.receive(channel)
                    if message.get("type") == "board.event":
                        await self.deliver(message)
                    if loop.time() - rejoined > RELAY_REJOIN_SECONDS:
                        await layer.group_add(group, channel)
                        rejoined = loop.time()
            except asyncio.CancelledError:
                raise
            except Exception:  # the tail delivers from the log meanwhile
                log.exception("live frames of team %s lost the channel layer", self.team)
                self.joined.set()
                await asyncio.sleep(RELAY_RETRY_SECONDS)
            finally:
                if channel is not None:
                    with contextlib.suppress(Exception):
                        await layer.group_discard(group, channel)

    async def deliver(self, message: dict[str, Any]) -> None:
        """A consumer that is in step takes the frame now, in this loop: its send
        hands the text to the server's buffer and does not wait on the client. One
        with a gap to fill from the log, or busy catching up, takes it in a task of
        its own (its lock keeps the order), so it holds up no one else."""
        for n, consumer in enumerate(list(self.consumers), 1):
            if n % RELAY_BATCH == 0:
                await asyncio.sleep(0)
            if consumer.pending is not None:
                consumer.pending.append(message)
            elif message["seq"] == consumer.last_seq + 1 and not consumer.lock.locked():
                try:
                    await consumer.board_event(message)
                except Exception:  # one client's failure is not the others'
                    log.exception("could not send a live frame to a board socket")
            elif message["seq"] > consumer.last_seq:
                late = asyncio.get_running_loop().create_task(consumer.board_event(message))
                self.late.add(late)
                late.add_done_callback(self.late.discard)


_tails: dict[tuple[asyncio.AbstractEventLoop, str], _TeamTail] = {}


async def _follow_tail(consumer: BoardConsumer) -> None:
    loop = asyncio.get_running_loop()
    tail = _tails.get((loop, consumer.team))
    if tail is None:
        tail = _tails[loop, consumer.team] = _TeamTail(consumer.team)
        tail.task = loop.create_task(tail.watch())
        tail.relay_task = loop.create_task(tail.relay())
    tail.consumers.add(consumer)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(tail.joined.wait(), RELAY_JOIN_SECONDS)


async def _unfollow_tail(consumer: BoardConsumer) -> None:
    key = (asyncio.get_running_loop(), consumer.team)
    tail = _tails.get(key)
    if tail is None:
        return
    tail.consumers.discard(consumer)
    if not tail.consumers:
        del _tails[key]
        tasks = [t for t in (tail.task, tail.relay_task, *tail.late) if t is not None]
        for task in tasks:
            task.cancel()
        # The relay leaves the layer's group on its way out.
        await asyncio.gather(*tasks, return_exceptions=True)


class BoardConsumer(AsyncJsonWebsocketConsumer):
    # No channel of the layer per client: the team's _TeamTail relays live frames.
    channel_layer_alias = None
    team: str
    last_seq: int
    # Live frames that came while the hello's sequence was being read (None after).
    pending: list[dict[str, Any]] | None

    async def connect(self) -> None:
        # Refusals accept first, then close: a close before accept is an HTTP 403 at
        # the handshake, and the client would never see the documented close code.
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        params = _query(self.scope)
        team = params.get("team", "default")
        if not await _can_see(user, team):
            await self.accept()
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.team = team
        self.lock = asyncio.Lock()
        self.pending = []
        await self.accept()
        self.standing = asyncio.get_running_loop().create_task(self._hold_standing())
        connected[team] += 1
        self.counted = True
        # Following before reading the head: a change that commits in between is
        # held in ``pending``, not lost.
        self.following = True
        await _follow_tail(self)
        # Live frames are delivered only past this point: "since" may move it back.
        self.last_seq = await _latest(team)
        await self.send_json({"type": "hello", "seq": self.last_seq, "team": team})
        while self.pending:
            await self.board_event(self.pending.pop(0))
        self.pending = None

    async def _hold_standing(self) -> None:
        """Close the socket once its credential no longer holds (see
        STANDING_CHECK_SECONDS)."""
        while True:
            await asyncio.sleep(STANDING_CHECK_SECONDS)
            try:
                code = await _standing(self.scope, self.team)
            except Exception:  # the next look tries again
                log.exception("could not check a board socket's credential")
                continue
            if code is not None:
                await self.close(code=code)
                # No frame more from here, whenever the server reports the close.
                await self.disconnect(code)
                return

    async def _watch_log(self, content: dict[str, Any]) -> None:
        """``{"type": "watch-log", "task": id}`` streams the output of that task's
        newest run, and of each run after it (one task per socket; a new watch
        replaces the last); ``execution`` and ``offset`` resume where a client left
        off. ``{"type": "unwatch-log"}`` stops it."""
        old = getattr(self, "log_watch", None)
        if old is not None:
            old.cancel()
            self.log_watch = None
        if content["type"] == "unwatch-log":
            return
        task, execution, offset = (
            content.get("task"),
            content.get("execution"),
            content.get("offset", 0),
        )
        numbers = (execution, offset) if execution is not None else (offset,)
        if not (
            isinstance(task, str)
            and ID_PATTERN.match(task) is not None
            and all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= SEQ_MAX
                for v in numbers
            )
        ):
            await self.send_json(
                {
                    "type": "error",
                    "error": "validation_error",
                    "detail": "watch-log needs a task id (and integer execution, offset)",
                }
            )
            return
        self.log_watch = asyncio.get_running_loop().create_task(
            self._stream_log(task, execution, offset if execution is not None else 0)
        )

    async def _stream_log(self, task: str, execution: int | None, offset: int) -> None:
        """Send the run's new complete lines every LOG_POLL_SECONDS, at most LOG_CHUNK
        bytes a look, each send awaited before the next read: a slow client slows its
        own stream, never the run. One that falls more than LOG_BEHIND_MAX behind
        skips ahead and is told how much it missed (the download has it all). A
        newer run of the task, once it has printed, takes over from offset 0."""
        team = self.team
        try:
            while True:
                latest = await asyncio.to_thread(runlogs.newest, team, task)
                if latest is not None and latest != execution:
                    execution, offset = latest, 0
                if execution is None:
                    await asyncio.sleep(LOG_POLL_SECONDS)
                    continue
                size = await asyncio.to_thread(runlogs.size, team, task, execution)
                frame = {"type": "log", "task": task, "execution": execution}
                if size - offset > LOG_BEHIND_MAX:
                    skipped = size - offset - LOG_CHUNK
                    offset += skipped
                    await self.send_json({**frame, "skipped": skipped, "offset": offset})
                chunk = await asyncio.to_thread(
                    runlogs.read, team, task, execution, offset, LOG_CHUNK
                )
                end = chunk.rfind(b"\n") + 1
                if end == 0 and len(chunk) == LOG_CHUNK:
                    end = len(chunk)  # one line longer than a chunk: send it as it is
                if end:
                    text = chunk[:end].decode("utf-8", errors="replace")
                    await self.send_json({**frame, "offset": offset, "text": text})
                    offset += end
                    if end == LOG_CHUNK:
                        continue  # more is waiting: no pause
                await asyncio.sleep(LOG_POLL_SECONDS)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("could not stream the log of task %s", task)

    async def disconnect(self, code: int) -> None:
        for name in ("log_watch", "standing"):
            running = getattr(self, name, None)
            if running is not None and running is not asyncio.current_task():
                running.cancel()
        if getattr(self, "counted", False):
            self.counted = False
            connected[self.team] -= 1
            if connected[self.team] <= 0:
                del connected[self.team]
        if getattr(self, "following", False):
            self.following = False
            await _unfollow_tail(self)

    async def take_missed(self, missed: list[dict[str, Any]], head: int) -> None:
        """Deliver what the log holds up to ``head`` that this client has not had:
        ``missed`` (read once for every client behind), then the log for the rest."""
        async with self.lock:
            for message in missed:
                await self._take(message)
            if head > self.last_seq:
                await self._catch_up(head)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # A client's frame takes this socket's turn first, before the thread hop that
        # closes stale connections: live frames the relay brings meanwhile wait behind
        # it, so a "since" sent before them is answered before them.
        lock = getattr(self, "lock", None)
        if message["type"] == "websocket.receive" and lock is not None:
            async with lock:
                await super().dispatch(message)
            return
        await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """A frame that is not JSON gets an error frame; the socket stays open."""
        try:
            content = json.loads(text_data if text_data is not None else (bytes_data or b""))
        except (ValueError, RecursionError):
            await self.send_json(
                {"type": "error", "error": "validation_error", "detail": "frames are JSON objects"}
            )
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") in ("watch-log", "unwatch-log"):
            await self._watch_log(content)
            return
        if not isinstance(content, dict) or content.get("type") != "since":
            await self.send_json(
                {
                    "type": "error",
                    "error": "validation_error",
                    "detail": 'send {"type": "since", "seq": N}',
                }
            )
            return
        seq = content.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= SEQ_MAX:
            await self.send_json(
                {
                    "type": "error",
                    "error": "validation_error",
                    "detail": "seq must be a non-negative integer",
                }
            )
            return
        # Under self.lock: dispatch holds it for every client frame.
        oldest = await _replay_gap(self.team, seq)
        if oldest is not None:
            # What came after ``seq`` was pruned: the client must reload the
            # board, then take live events from here.
            self.last_seq = await _latest(self.team)
            await self.send_json(
                {
                    "type": "reload",
                    "seq": self.last_seq,
                    "oldest_seq": oldest,
                    "detail": f"events after {seq} are no longer kept; reload the board",
                }
            )
            return
        self.last_seq = seq
        await self._catch_up(None)

    async def _catch_up(self, upto: int | None) -> None:
        """Send everything in the log after last_seq (up to ``upto``), in order."""
        while True:
            batch = await _events_after(self.team, self.last_seq, upto)
            for seq, frames in batch:
                for frame in frames:
                    await self.send_json(frame)
                self.last_seq = seq
            if len(batch) < REPLAY_BATCH or (upto is not None and self.last_seq >= upto):
                return

    async def board_event(self, message: dict[str, Any]) -> None:
        """One live change (from the team's relay)."""
        async with self.lock:
            await self._take(message)

    async def _take(self, message: dict[str, Any]) -> None:
        """Under self.lock: send the change if it is the next in sequence, after the
        log's gap fill if one is missing; drop it if already sent."""
        seq = message["seq"]
        if seq <= self.last_seq:
            return  # already delivered (by replay or an earlier gap fill)
        if seq > self.last_seq + 1:
            await self._catch_up(seq - 1)
            if seq <= self.last_seq:
                return
        for text in message["texts"]:
            await self.send(text_data=text)
        self.last_seq = seq


def _query(scope: dict[str, Any]) -> dict[str, str]:
    raw = scope.get("query_string", b"").decode("latin-1")
    return {k: v[-1] for k, v in parse_qs(raw).items()}
