"""The product's settings with django-q2's scheduler looking soon, for a test that
waits on a schedule.

django-q2's guard loop calls its scheduler when the seconds it has counted reach
30 (one ``guard_cycle`` each turn, 0.5 s by default), so its first look comes half a
minute after the cluster starts. A cycle of 15 s makes it the second turn, 15 s in,
and every 30 s after, as before. Not the first turn (a cycle of 30): that look races
the worker's own start writing the schedules (``post_spawn``) and, on SQLite, loses
about two times in three ("database is locked" past the 250 ms busy timeout), which
leaves the schedules to the next look, 30 s later."""

from clawboo.settings import *  # noqa: F403
from clawboo.settings import Q_CLUSTER as _Q_CLUSTER

Q_CLUSTER = {**_Q_CLUSTER, "guard_cycle": 15}
