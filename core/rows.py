"""Rows of hand-written SQL as model instances, converted as the ORM converts a row.

For hot paths (every claim, every authenticated request): a queryset compiles its
SQL, looks up converters and works out the model's init order on every call; here
that is worked out once per model, database and column order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)

# Per model, database and column order: where each concrete field's value sits in
# the row and the converters the ORM would apply to it (Django's own, the backend's
# and the field's).
_Plan = list[tuple[int, Any, list[Any]]]
_ROW_PLANS: dict[tuple[type[Model], str, tuple[str, ...]], _Plan] = {}


def _row_plan(model: type[Model], columns: tuple[str, ...]) -> _Plan:
    key = (model, connection.vendor, columns)
    plan = _ROW_PLANS.get(key)
    if plan is None:
        at = {name: i for i, name in enumerate(columns)}
        table = model._meta.db_table
        plan = []
        for field in model._meta.concrete_fields:  # model.from_db's order
            col = field.get_col(table)
            convert = connection.ops.get_db_converters(col) + field.get_db_converters(connection)
            plan.append((at[str(field.column)], col, convert))
        _ROW_PLANS[key] = plan
    return plan


def from_rows(model: type[M], columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> list[M]:
    """``rows`` (every concrete column of ``model``, in any order named by
    ``columns``) as instances, converted as the ORM converts a row."""
    plan = _row_plan(model, columns)
    names = [f.attname for f in model._meta.concrete_fields]
    built = []
    for row in rows:
        values = []
        for i, col, convert in plan:
            value = row[i]
            for fn in convert:
                value = fn(value, col, connection)
            values.append(value)
        built.append(model.from_db(connection.alias, names, values))
    return built
