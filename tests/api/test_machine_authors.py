"""A remote host's machine token signs its comments and chat lines ``machine-<hash>``
(nobody can forge it); people read the host's name, marked "(host)", which no
username nor agent id can spell (no spaces, no parentheses)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from board import store
from core import machines
from tests.api.conftest import make_client
from tests.api.test_narration import chat

pytestmark = pytest.mark.django_db


def machine_client(agent_id: str, host: str) -> tuple[APIClient, str]:
    token, key = machines.mint(host, [agent_id])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client, token.user.username


def test_a_hosts_comments_and_chat_lines_read_as_its_host_not_machine_hash(api, agent):
    # The board showed "machine-3f9a0c…" above each of them.
    make_client("laptop")  # a person named as the host: still told apart
    remote, signed = machine_client(agent.id, "laptop")
    assert signed.startswith("machine-")
    task = store.create_task(title="Ship it").task
    assert store.claim(task.id, agent.id).ok
    said = remote.post(f"/api/board/tasks/{task.id}/comments", {"body": "on it"}, format="json")
    assert said.status_code == 201, said.content
    assert said.json()["author"] == signed and said.json()["author_name"] == "laptop (host)"
    api.post(f"/api/board/tasks/{task.id}/comments", {"body": "thanks"}, format="json")
    comments = api.get(f"/api/board/tasks/{task.id}/comments").json()
    assert [(c["author"], c["author_name"]) for c in comments] == [
        (signed, "laptop (host)"),
        ("ada", "ada"),
    ]
    posted = remote.post("/api/teams/default/chat", {"body": "hello"}, format="json")
    assert posted.status_code == 201, posted.content
    line = chat(api)[-1]
    assert (line["author"], line["body"]) == (signed, "hello")
    assert line["author_name"] == line["actor_name"] == "laptop (host)"
