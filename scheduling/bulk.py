"""Writing many rows at once.

Django's `bulk_update` builds a CASE expression per column with a branch per row: for a few hundred
rows that costs more in Python than the database spends on them. On PostgreSQL the rows go instead
as one prepared UPDATE by primary key, executed for every row in one pipelined round trip.

Its `bulk_create` compiles one INSERT with a placeholder per value (a cycle that binds 20,000 replicas
passes hundreds of thousands): on PostgreSQL new rows go instead through COPY, which takes them as a
stream. Their primary keys are not read back: a caller that needs them uses `bulk_create`.

Both take a value Django would pass on unchanged (text, a whole number, a flag, an aware time) as it
is, and only the others through the field's `get_db_prep_save`: its chain of calls cost most of a
20,000-row COPY. Rows an UPDATE sets to the same values go in one statement.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache

from django.db import connection, models, transaction

# Django's own field classes (not subclasses, which may convert) whose save path returns these
# types unchanged on PostgreSQL
_AS_IS: dict[type, tuple[type, ...]] = {
    models.CharField: (str,), models.TextField: (str,), models.SlugField: (str,),
    models.BooleanField: (bool,), models.FloatField: (float,), models.UUIDField: (uuid.UUID,),
    **{kind: (int,) for kind in (models.IntegerField, models.BigIntegerField, models.SmallIntegerField,
                                 models.PositiveIntegerField, models.PositiveSmallIntegerField,
                                 models.PositiveBigIntegerField, models.AutoField, models.BigAutoField)},
}


@cache
def _prep(field: models.Field) -> Callable[[object], object]:
    """What `field.get_db_prep_save` makes of a value, with its shortcuts (see the module's text)."""
    target = field.target_field if isinstance(field, models.ForeignKey) and type(field) is models.ForeignKey else field
    kinds = _AS_IS.get(type(target))
    full = field.get_db_prep_save
    if type(field) is models.JSONField:
        encoder = field.encoder

        def json_value(value):
            if type(value) in (dict, list):
                return connection.ops.adapt_json_value(value, encoder)
            return full(value, connection)
        return json_value
    if type(field) is models.DateTimeField:
        def when(value):
            if value is None or (type(value) is datetime and value.tzinfo is not None):
                return value
            return full(value, connection)
        return when
    if kinds is None:
        return lambda value: full(value, connection)

    def as_is(value):
        if value is None or type(value) in kinds:
            return value
        return full(value, connection)
    return as_is


def _reader(field: models.Field) -> Callable[[models.Model], object]:
    """The value an INSERT by the ORM saves: `pre_save` fills auto_now(_add) fields, else the attribute."""
    if type(field).pre_save is models.Field.pre_save or (
            isinstance(field, models.DateField) and not field.auto_now and not field.auto_now_add
            and type(field).pre_save in (models.DateField.pre_save, models.DateTimeField.pre_save)):
        attname = field.attname
        return lambda row: getattr(row, attname)
    return lambda row: field.pre_save(row, True)


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
    preps = [(c.attname, _prep(c), _same_key(c)) for c in columns]
    sets = ", ".join(f"{quote(c.column)} = %s" for c in columns)
    # rows with the same values (a cycle's thousands of newly scheduled jobs) share one UPDATE
    groups: dict[tuple, list] = defaultdict(list)
    for row in rows:
        values = [getattr(row, attname) for attname, _, _ in preps]
        groups[tuple(key(value) for (_, _, key), value in zip(preps, values, strict=True))].append((row.pk, values))
    if len({row.pk for row in rows}) < len(rows):   # a row given twice: its last values win, as one by one
        groups = {(n,): [(row.pk, [getattr(row, attname) for attname, _, _ in preps])] for n, row in enumerate(rows)}
    single, shared = [], []
    for members in groups.values():
        values = [prep(value) for (_, prep, _), value in zip(preps, members[0][1], strict=True)]
        if len(members) == 1:
            single.append([*values, members[0][0]])
        else:
            shared.append([*values, [pk for pk, _ in members]])
    table, key_column = quote(meta.db_table), quote(meta.pk.column)
    with connection.cursor() as cursor:
        if single:
            cursor.executemany(f"UPDATE {table} SET {sets} WHERE {key_column} = %s", single)
        for params in shared:
            cursor.execute(f"UPDATE {table} SET {sets} WHERE {key_column} = ANY(%s)", params)


def _same_key(field: models.Field) -> Callable[[object], object]:
    """A key equal for two values only when the field stores them alike: JSON by its text, the others by
    type and value."""
    if isinstance(field, models.JSONField):
        encoder = field.encoder

        def json_key(value):
            if value is None:
                return None
            try:
                return "json", json.dumps(value, cls=encoder)
            except (TypeError, ValueError):   # the UPDATE says what is wrong, as before
                return object()
        return json_key
    return lambda value: (type(value), value) if value is None or isinstance(value, _HASHABLE) else object()


_HASHABLE = (str, int, float, bool, datetime, uuid.UUID)


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
        readers = [(_reader(f), _prep(f)) for f in fields]
        with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {target} ({names}) FROM STDIN") as copy:
            write = copy.write_row
            for row in rows:
                write([prep(read(row)) for read, prep in readers])
        if ignore_conflicts:
            cursor.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {target} ON CONFLICT DO NOTHING")
            cursor.execute(f"DROP TABLE {target}")
    for row in rows:
        row._state.adding, row._state.db = False, connection.alias
