"""Writing many changed rows at once.

Django's `bulk_update` builds a CASE expression per column with a branch per row: for a few hundred
rows that costs more in Python than the database spends on them. On PostgreSQL the rows go instead
as one prepared UPDATE by primary key, executed for every row in one pipelined round trip.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, models


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
