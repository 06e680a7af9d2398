"""Database backends of our own (see :mod:`clawboo.db.sqlite3`)."""
