"""The delegation ceilings of seed 000 (SPEC §10), declared once.

They guard the agent create path: a create with a parent may not nest deeper than
:data:`MAX_DEPTH` or give a parent more than :data:`MAX_LIVE_CHILDREN` live
children; an agent may file at most :data:`ROOT_RATE_LIMIT` root tasks per
:data:`ROOT_RATE_WINDOW` per team. The executor checks the same depth before it
dispatches a task.
"""

from __future__ import annotations

import datetime as dt

MAX_DEPTH = 2
MAX_LIVE_CHILDREN = 24
ROOT_RATE_LIMIT = 30
ROOT_RATE_WINDOW = dt.timedelta(milliseconds=300_000)
