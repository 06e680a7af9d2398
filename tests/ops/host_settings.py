"""Settings of the processes a multi-host test runs on each "host": the product's
own, with the channel layer's key prefix per run (so concurrent runs on one
Redis never hear each other)."""

import os

from clawboo.settings import *  # noqa: F403
from clawboo.settings import CHANNEL_LAYERS as _LAYERS

if "channels_redis" in _LAYERS["default"]["BACKEND"]:
    CHANNEL_LAYERS = {
        "default": {
            **_LAYERS["default"],
            "CONFIG": {
                **_LAYERS["default"]["CONFIG"],
                "prefix": os.environ.get("CLAWBOO_TEST_LAYER_PREFIX", "asgi"),
            },
        }
    }
