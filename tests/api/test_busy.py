"""A write that cannot get the database's lock in its budget is ``503 busy`` with a
Retry-After, never a 500; reads are not affected by a held write lock."""

from __future__ import annotations

import sqlite3

import pytest
from django.db import connection
from django.test import RequestFactory

from board.models import Task
from core.api.errors import server_error
from core.storage import WriteBudgetExceeded

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_write_whose_lock_budget_runs_out_is_503_busy_and_writes_nothing(api, settings):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's single writer; PostgreSQL writes wait on row locks")
    settings.CLAWBOO_DB_WRITE_BUDGET_MS = 300
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=5)
    holder.execute("BEGIN IMMEDIATE")  # another process's long write
    try:
        response = api.post("/api/board/tasks", {"title": "later"}, format="json")
        listed = api.get("/api/board/tasks")
    finally:
        holder.rollback()
        holder.close()
    assert response.status_code == 503, response.content
    assert response.json()["error"] == "busy" and response.json()["retry_after"] == 1
    assert response["Retry-After"] == "1"
    assert listed.status_code == 200  # WAL: reading never waits on the writer
    assert not Task.objects.filter(title="later").exists()
    again = api.post("/api/board/tasks", {"title": "later"}, format="json")
    assert again.status_code == 201


def test_busy_outside_a_drf_view_is_503_too():
    request = RequestFactory().get("/api/board/tasks")
    try:
        raise WriteBudgetExceeded("database stayed locked for 1.5s")
    except WriteBudgetExceeded:
        response = server_error(request)
    assert response.status_code == 503 and response["Retry-After"] == "1"
    page = RequestFactory().get("/board/")
    try:
        raise WriteBudgetExceeded("database stayed locked for 1.5s")
    except WriteBudgetExceeded:
        response = server_error(page)
    assert response.status_code == 503


def test_the_schema_documents_busy_on_writes_only(api):
    schema = api.get("/api/schema/?format=json").json()
    create = schema["paths"]["/api/board/tasks"]["post"]["responses"]["503"]
    assert "busy" in create["description"] and "Retry-After" in create["headers"]
    assert "503" not in schema["paths"]["/api/board/tasks"]["get"]["responses"]
