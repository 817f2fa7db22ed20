"""Backup and restore for operators: one archive holds the database, the file trees the platform keeps
and a manifest that says what was saved (`manage.py backup`, `manage.py restore`)."""
