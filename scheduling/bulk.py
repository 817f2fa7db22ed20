"""Writing many rows at once.

Django's `bulk_update` builds a CASE expression per column with a branch per row: for a few hundred
rows that costs more in Python than the database spends on them. On PostgreSQL the rows go instead
as one prepared UPDATE by primary key, executed for every row in one pipelined round trip.

Its `bulk_create` compiles one INSERT with a placeholder per value (a cycle that binds 20,000 replicas
passes hundreds of thousands): on PostgreSQL new rows go instead through COPY, which takes them as a
stream. Their primary keys are not read back: a caller that needs them uses `bulk_create`.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, models, transaction


def update_rows(rows: Sequence[models.Model], fields: Sequence[str]) -> None:
    """Save `fields` of every row (all of one model), as `bulk_update` would."""
    if not rows:
        return
    model = type(rows[0])
    if connection.vendor != "postgresql":
        model.objects.bulk_update(rows, fields, batch_size=1000)
        return
    meta, quote = model._meta, connection.ops.quote_name
    columns = [meta.get_field(name) for name in fields]
    sql = (f"UPDATE {quote(meta.db_table)} SET " + ", ".join(f"{quote(c.column)} = %s" for c in columns)
           + f" WHERE {quote(meta.pk.column)} = %s")
    params = [[c.get_db_prep_save(getattr(row, c.attname), connection) for c in columns] + [row.pk] for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def insert_rows(rows: Sequence[models.Model], *, ignore_conflicts: bool = False, keys: bool = False) -> None:
    """Insert new rows (all of one model, primary keys left to the database), as `bulk_create` would;
    `ignore_conflicts`: a row that breaks a unique constraint is skipped. Their `pk` is not read back,
    unless `keys`: then each row gets its key (on PostgreSQL taken from the key's sequence beforehand)."""
    if keys and ignore_conflicts:
        raise ValueError("keys are not read back for rows a conflict may skip")
    if not rows:
        return
    model = type(rows[0])
    if connection.vendor != "postgresql":
        model.objects.bulk_create(rows, batch_size=500 if keys else 2000, ignore_conflicts=ignore_conflicts)
        return
    meta, quote = model._meta, connection.ops.quote_name
    fields = [f for f in meta.concrete_fields if f is not meta.pk]   # the key comes from its sequence
    if keys:
        with connection.cursor() as cursor:
            cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                           [meta.db_table, meta.pk.column, len(rows)])
            for row, (key,) in zip(rows, cursor.fetchall(), strict=True):
                row.pk = key
        fields = [meta.pk, *fields]
    names = ", ".join(quote(f.column) for f in fields)
    table = quote(meta.db_table)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:   # as bulk_create: no savepoint
        target = table
        if ignore_conflicts:   # COPY stops at a conflict: into a scratch table, then INSERT ... ON CONFLICT
            target = quote(f"new_{meta.db_table}")
            cursor.execute(f"CREATE TEMPORARY TABLE {target} AS SELECT {names} FROM {table} WITH NO DATA")
        with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {target} ({names}) FROM STDIN") as copy:
            for row in rows:
                # pre_save fills auto_now(_add) fields, as an INSERT by the ORM would
                copy.write_row([f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields])
        if ignore_conflicts:
            cursor.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {target} ON CONFLICT DO NOTHING")
            cursor.execute(f"DROP TABLE {target}")
    for row in rows:
        row._state.adding, row._state.db = False, connection.alias
