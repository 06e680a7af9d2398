"""The root logger a test changes is put back (tests/conftest.py). A command run
in-process calls ``django.setup()``, which configures logging again: the root's
console handler was bound to the stream pytest captured for that test, closed when
it ended, and a later test's library logging (websockets' "connection closed") wrote
to it: "--- Logging error --- ValueError: I/O operation on closed file". The two
tests run in file order, the second after the first."""

from __future__ import annotations

import logging
import logging.config

from django.conf import settings


def test_a_command_run_in_process_configures_logging_again(capsys):
    logging.config.dictConfig(settings.LOGGING)  # what django.setup() does
    logging.getLogger("websockets.client").info("connection closed")
    assert "connection closed" in capsys.readouterr().err


def test_the_next_test_logs_to_no_stream_an_earlier_test_closed():
    streams = [getattr(h, "stream", None) for h in logging.getLogger().handlers]
    assert not [s for s in streams if getattr(s, "closed", False)]
