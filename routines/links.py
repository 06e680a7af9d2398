"""Where a routine's pages link: apart from :mod:`routines.views`, so that the admin
(loaded by every process at start) links there without importing the views' API."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from routines.models import Routine


def in_review_url(routine: Routine) -> str:
    """The board filtered to a routine's fires (the admin links there too)."""
    return f"{reverse('board')}?{urlencode({'team': routine.team_id, 'routine': routine.id})}"
