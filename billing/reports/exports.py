"""Report exports: CSV streamed from an async iterator, Excel written in constant memory.

Both read the rows in chunks and keep nothing but the current chunk and the running totals.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path

import xlsxwriter
from asgiref.sync import sync_to_async
from django.db import connections

log = logging.getLogger(__name__)

# (header, UsageDay field read by values_list)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("date", "day"),
    ("workspace", "workspace__slug"),
    ("queue", "queue"),
    ("job_id", "job_id"),
    ("job", "job_name"),
    ("node", "node"),
    ("gpu_model", "gpu_model"),
    ("sharing_mode", "sharing"),
    ("gpu_hours_allocated", "allocated_gpu_hours"),
    ("gpu_hours_used", "used_gpu_hours"),
    ("idle_allocated_gpu_hours", "idle_gpu_hours"),
    ("cpu_core_hours", "cpu_core_hours"),
    ("memory_gib_hours", "memory_gib_hours"),
    ("estimated_cost", "estimated_cost"),
    ("final_cost", "cost"),
    ("currency", "currency"),
)
HEADER = [h for h, _ in COLUMNS]
FIELDS = [f for _, f in COLUMNS]
NUMERIC = [i for i, (_, f) in enumerate(COLUMNS) if f.endswith(("_hours", "cost"))]
EXCEL_MAX_ROWS = 1_048_576  # per sheet, header included
CSV_CHUNK_ROWS = 2000


def raw_rows(queryset, *, chunk_size: int | None = None) -> Iterator[tuple]:
    """The rows of a values_list queryset as the database driver returns them, fetched
    `chunk_size` at a time (a server-side cursor on PostgreSQL). Django's per-value converters
    are skipped: they would double the export's time on SQLite. PostgreSQL hands back Decimal
    and date; SQLite the number and the ISO date it stored."""
    chunk_size = chunk_size or CSV_CHUNK_ROWS
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(chunk_size):
            yield from chunk


async def aiter_rows(rows: Iterable[Sequence], *, chunk_size: int | None = None) -> AsyncIterator[Sequence]:
    """Rows of a blocking iterable for async code: each chunk is pulled by one call into the
    database thread, so one chunk is held at a time. (QuerySet.aiterator() runs a values_list
    query eagerly in the event loop, which Django forbids.)"""
    chunk_size = chunk_size or CSV_CHUNK_ROWS
    source = iter(rows)  # a generator: nothing runs until the first pull

    def pull() -> list:
        try:
            return list(islice(source, chunk_size))
        except Exception:
            # In the database thread: hand the connection back now, the stream will not finish.
            for conn in connections.all(initialized_only=True):
                conn.close()
            raise

    take = sync_to_async(pull)
    while True:
        chunk = await take()
        for row in chunk:
            yield row
        if len(chunk) < chunk_size:
            return


async def csv_chunks(rows: AsyncIterator[Sequence], *, chunk_rows: int | None = None) -> AsyncIterator[bytes]:
    """CSV bytes: the header at once, then one piece per `chunk_rows` rows as they arrive."""
    chunk_rows = chunk_rows or CSV_CHUNK_ROWS
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(HEADER)
    yield buffer.getvalue().encode()
    buffer.seek(0)
    buffer.truncate()
    pending = 0
    try:
        async for row in rows:
            writer.writerow(row)  # csv formats date, Decimal, float and int as themselves
            pending += 1
            if pending >= chunk_rows:
                yield buffer.getvalue().encode()
                buffer.seek(0)
                buffer.truncate()
                pending = 0
    except Exception:
        # The status line is sent: end the response (a hanging one holds its connection) and
        # say in the file that it is incomplete.
        log.exception("CSV export failed mid-stream")
        writer.writerow(["# export failed: this file is incomplete, try again"])
        pending = 1
    if pending:
        yield buffer.getvalue().encode()


def _string_writer(sheet) -> Callable:
    def write(row: int, col: int, value) -> None:
        sheet.write_string(row, col, value if isinstance(value, str) else str(value))

    return write


def write_xlsx(path: Path | str, rows: Iterable[Sequence], *, totals: Sequence = (),
               progress: Callable[[int], None] | None = None, every: int = 20_000,
               max_rows: int = EXCEL_MAX_ROWS) -> int:
    """Write the rows to an .xlsx file in XlsxWriter's constant-memory mode, starting a new sheet
    whenever one is full, then a Totals sheet from `totals` (billing.reports.selectors.Totals, the same
    figures the page shows). `progress(rows_done)` is called every `every` rows. Returns the rows."""
    if max_rows < 2:
        raise ValueError("max_rows must leave room for the header and one row")
    workbook = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    bold = workbook.add_format({"bold": True})
    numeric = frozenset(NUMERIC) | {FIELDS.index("job_id")}
    sheet, sheet_row, sheets, done = None, max_rows, 0, 0
    for row in rows:
        if sheet_row >= max_rows:
            sheets += 1
            sheet = workbook.add_worksheet("Report" if sheets == 1 else f"Report {sheets}")
            sheet.write_row(0, 0, HEADER, bold)
            sheet.set_column(0, len(HEADER) - 1, 14)
            # One writer per column, chosen once: this loop runs for every cell of a million rows.
            writers = [sheet.write_number if col in numeric else sheet.write_string for col in range(len(HEADER))]
            writers[0] = _string_writer(sheet)  # the date: ISO text from SQLite, a date from PostgreSQL
            sheet_row = 1
        for col, value in enumerate(row):
            writers[col](sheet_row, col, value)
        sheet_row += 1
        done += 1
        if progress and done % every == 0:
            progress(done)
    if sheet is None:  # no rows: still a valid workbook with the header
        workbook.add_worksheet("Report").write_row(0, 0, HEADER, bold)
    summary = workbook.add_worksheet("Totals")
    summary.write_row(0, 0, ["currency", "rows", *[HEADER[i] for i in NUMERIC]], bold)
    for r, total in enumerate(totals, start=1):
        summary.write_row(r, 0, [total.currency, total.rows, *[total.values[FIELDS[i]] for i in NUMERIC]])
    workbook.close()
    if progress:
        progress(done)
    return done
