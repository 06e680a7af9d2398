"""Test settings: SQLite in a fresh temp state dir, or the PostgreSQL server named
by ``CLAWBOO_TEST_DATABASE_URL`` (CI sets it when PostgreSQL answers)."""

import os
import tempfile
from pathlib import Path

_state = Path(tempfile.mkdtemp(prefix="clawboo-test-"))
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each xdist worker keeps its own state dir: the one it inherited from the
    # controller would have two workers write the same files.
    os.environ["CLAWBOO_STATE_DIR"] = str(_state)
else:
    os.environ.setdefault("CLAWBOO_STATE_DIR", str(_state))
os.environ.pop("DATABASE_URL", None)

from clawboo.settings import *  # noqa: E402,F403
from clawboo.settings import database_config  # noqa: E402

_url = os.environ.get("CLAWBOO_TEST_DATABASE_URL", "")
DATABASES = {"default": database_config(_url or None, STATE_DIR)}  # noqa: F405
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A real file (not :memory:), so subprocess tests share the database and WAL applies.
    DATABASES["default"]["TEST"] = {"NAME": str(STATE_DIR / "test.sqlite3")}  # noqa: F405
else:
    # One database per run, so two suites on one server never trample each other.
    DATABASES["default"]["TEST"] = {"NAME": f"test_clawboo_{os.getpid()}"}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
Q_CLUSTER = {**Q_CLUSTER, "sync": True}  # noqa: F405

_redis = os.environ.get("CLAWBOO_TEST_REDIS_URL", "")
if _redis:
    CLAWBOO_REDIS_URL = _redis
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # A per-run prefix keeps concurrent suites on one Redis apart.
            "CONFIG": {
                "hosts": [_redis],
                "prefix": f"clawboo-test-{os.getpid()}",
            },
        }
    }

# The stub CLIs the executor's tests write answer only a run's argv, not --version:
# their preflight stops at "the binary resolves". tests/executor/test_health.py
# turns the version probe back on.
CLAWBOO_HEALTH_VERSION_PROBE = False
# So do the processes the tests start: a remote worker (clawboo worker) reads its
# environment, as the server's settings do.
os.environ.setdefault("CLAWBOO_HEALTH_VERSION_PROBE", "0")
