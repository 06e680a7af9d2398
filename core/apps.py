from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The foundation: teams, the agent registry, the event log, chat narration,
    storage and the API kit. It imports no other app of the project.

    Its label stays ``clawboo`` (the app it was split from) so the tables, the
    migration history and the admin's URLs of existing installs stay where they are.
    """

    name = "core"
    label = "clawboo"
    verbose_name = "Clawboo core"

    def ready(self) -> None:
        # Importing the storage layer connects its per-connection pragma hook.
        from core import authors, events, live, storage  # noqa: F401

        # A person's username is no agent's id (GOVERNANCE §6: one author namespace).
        authors.install()

        # After commit: push every event to the team's live board (with its narration).
        events.subscribe(live.publish)
