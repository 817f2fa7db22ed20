"""Migrations of the project's apps that cannot be reversed, each with the reason (none today).

tests/upgrade/test_migrations_reversible.py fails on a RunPython without reverse_code, a RunSQL without
reverse_sql or any other irreversible operation unless its migration is listed here, and on an entry
here whose migration has become reversible. A data fill that needs no undo is reversible with
`migrations.RunPython.noop` as its reverse (its rows go with the table, or the forward run writes
them again); list a migration here only when going back would lose what cannot be rebuilt.

Rolling back past an irreversible migration: restore the backup taken before the upgrade.
"""

IRREVERSIBLE: dict[tuple[str, str], str] = {
    # ("app", "0007_name"): "why it cannot be undone",
}
