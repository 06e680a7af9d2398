"""Settings for worker subprocesses: the product's own, minus daphne.

Workers never serve HTTP, and daphne's app installs the Twisted reactor at
startup (about half of a worker's start time); tests start dozens of workers.
"""

from clawboo.settings import *  # noqa: F403
from clawboo.settings import INSTALLED_APPS as _APPS

INSTALLED_APPS = [app for app in _APPS if app != "daphne"]
