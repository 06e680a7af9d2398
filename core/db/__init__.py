"""Database backends of our own (see :mod:`core.db.sqlite3`)."""
