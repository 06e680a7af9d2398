"""The product's settings with django-q2's scheduler looking at once, for a test
that waits on a schedule.

django-q2's guard loop calls its scheduler when the seconds it has counted reach
30 (one ``guard_cycle`` each turn, 0.5 s by default): a cycle of 30 s makes the
first turn, as the cluster starts, call it, and every turn after (30 s apart, as
before). A test then waits seconds, not the half minute the first look costs."""

from clawboo.settings import *  # noqa: F403
from clawboo.settings import Q_CLUSTER as _Q_CLUSTER

Q_CLUSTER = {**_Q_CLUSTER, "guard_cycle": 30}
