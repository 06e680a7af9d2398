"""The bench smoke tests' databases: migrated once per set of migrations and copied
(``bench.benchdb.migrate``), not migrated from scratch for each bench."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _bench_template_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    before = os.environ.get("CLAWBOO_BENCH_TEMPLATE_DIR")
    os.environ["CLAWBOO_BENCH_TEMPLATE_DIR"] = str(tmp_path_factory.mktemp("bench-templates"))
    yield
    if before is None:
        os.environ.pop("CLAWBOO_BENCH_TEMPLATE_DIR", None)
    else:
        os.environ["CLAWBOO_BENCH_TEMPLATE_DIR"] = before
