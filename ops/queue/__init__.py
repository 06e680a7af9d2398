"""django-q2's own tables in the console, named so nobody takes them for board tasks."""
