"""The report sums are read once per state of the ledger and kept: the same figures again cost no
aggregate query, and any write to the ledger (posting, an adjustment, a rolled-back write) gives the
next read the ledger as it is."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext
from tests_reports_helpers import at, place, submit

from billing.ledger.posting import post_ledger
from billing.ledger.services import add_adjustment
from billing.models import ChargeLine, LedgerRevision
from billing.reports import selectors as reports
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

MARCH = reports.ReportFilters(start=date(2026, 3, 1), end=date(2026, 3, 31), workspace="vision-lab")


def vision_cost(user) -> Decimal:
    (total,) = reports.totals(reports.report_rows(user, MARCH))
    return total.cost


def aggregates(queries) -> list[str]:
    return [q["sql"] for q in queries if "SUM(" in q["sql"].upper()]


def test_the_same_sums_again_are_not_read_again(usage):
    alice = usage.tenants.alice
    first = vision_cost(alice)
    with CaptureQueriesContext(connection) as queries:
        assert vision_cost(alice) == first
    assert aggregates(queries.captured_queries) == []


def test_a_second_member_shares_nothing_but_the_figures_they_may_see(usage):
    """The kept sums are keyed on the query itself: a member of vision-lab reads vision's figures; a user
    outside it is refused as before, with nothing from the cache."""
    colleague = MembershipFactory(workspace=usage.tenants.vision).user
    assert vision_cost(colleague) == vision_cost(usage.tenants.alice)
    outsider = UserFactory()
    with pytest.raises(reports.Http404):
        reports.report_rows(outsider, MARCH)


def test_an_adjustment_is_in_the_next_read(usage):
    alice = usage.tenants.alice
    before = vision_cost(alice)
    line = ChargeLine.objects.filter(workspace=usage.tenants.vision).first()
    add_adjustment(user=usage.tenants.finance, workspace=usage.tenants.vision, amount="-5.00", reason="goodwill",
                   period=line.period)
    assert vision_cost(alice) == before - Decimal("5.00")


def test_new_usage_posted_is_in_the_next_read(usage):
    alice = usage.tenants.alice
    before = vision_cost(alice)
    job = submit(alice, usage.tenants.vision, "vision-more")
    place(job, at(date(2026, 3, 4), 2), at(date(2026, 3, 4), 3), node="h100-01", index=1)
    post_ledger(now=at(date(2026, 3, 4), 5))
    in_the_ledger = ChargeLine.objects.filter(workspace=usage.tenants.vision).aggregate(s=Sum("cost"))["s"]
    assert in_the_ledger > before
    assert vision_cost(alice) == in_the_ledger


def test_a_rolled_back_write_takes_its_revision_back(usage):
    alice = usage.tenants.alice
    before, revision = vision_cost(alice), LedgerRevision.current()
    line = ChargeLine.objects.filter(workspace=usage.tenants.vision).first()
    with pytest.raises(RuntimeError), transaction.atomic():
        add_adjustment(user=usage.tenants.finance, workspace=usage.tenants.vision, amount="7.00", reason="oops",
                       period=line.period)
        assert vision_cost(alice) == before + Decimal("7.00")  # read inside: the new revision's sums
        raise RuntimeError("rolled back")
    assert LedgerRevision.current() == revision
    assert vision_cost(alice) == before


def rows_html(user) -> str:
    from portal.templatetags.ledger_lines import ledger_line_rows

    return str(ledger_line_rows(reports.report_rows(user, MARCH).order_by("hour", "id")[:500]))


def line_reads(queries) -> list[str]:
    return [q["sql"] for q in queries if 'FROM "billing_chargeline"' in q["sql"] and "SUM(" not in q["sql"].upper()]


def test_the_ledger_lines_table_is_rendered_once_per_state_of_the_ledger(usage):
    alice = usage.tenants.alice
    first = rows_html(alice)
    assert "<tr" in first
    with CaptureQueriesContext(connection) as queries:
        assert rows_html(alice) == first
    assert line_reads(queries.captured_queries) == []
    line = ChargeLine.objects.filter(workspace=usage.tenants.vision).first()
    add_adjustment(user=usage.tenants.finance, workspace=usage.tenants.vision, amount="-5.00", reason="goodwill-rows",
                   period=line.period)
    assert "goodwill-rows" not in first
    assert "goodwill-rows" in rows_html(alice)


def test_the_kept_table_is_per_language_and_time_zone(usage):
    from django.utils import timezone, translation

    alice = usage.tenants.alice
    english = rows_html(alice)
    with translation.override("zh-hans"):
        chinese = rows_html(alice)
    assert "<td>用量</td>" in chinese and "<td>用量</td>" not in english
    with timezone.override("Asia/Tokyo"):
        tokyo = rows_html(alice)
    assert tokyo != english  # the hours read in the reader's zone


def revision_reads(queries) -> int:
    return sum('FROM "billing_ledgerrevision"' in q["sql"] for q in queries)


def test_one_revision_reads_the_revision_once_for_a_page_of_figures(usage):
    from billing.ledger.kept import one_revision

    alice = usage.tenants.alice
    vision_cost(alice)
    with CaptureQueriesContext(connection) as without:
        vision_cost(alice), vision_cost(alice), rows_html(alice)
    with CaptureQueriesContext(connection) as within, one_revision():
        vision_cost(alice), vision_cost(alice), rows_html(alice)
    assert revision_reads(without.captured_queries) == 3
    assert revision_reads(within.captured_queries) == 1


def test_a_write_inside_one_revision_is_in_the_reads_after_it_even_when_rolled_back(usage):
    from billing.ledger.kept import one_revision

    alice = usage.tenants.alice
    line = ChargeLine.objects.filter(workspace=usage.tenants.vision).first()
    with one_revision():
        before = vision_cost(alice)
        with pytest.raises(RuntimeError), transaction.atomic():
            add_adjustment(user=usage.tenants.finance, workspace=usage.tenants.vision, amount="7.00", reason="oops",
                           period=line.period)
            assert vision_cost(alice) == before + Decimal("7.00")
            raise RuntimeError("rolled back")
        assert vision_cost(alice) == before
        add_adjustment(user=usage.tenants.finance, workspace=usage.tenants.vision, amount="2.00", reason="kept",
                       period=line.period)
        assert vision_cost(alice) == before + Decimal("2.00")


def test_each_sum_of_the_same_rows_is_kept_apart(usage):
    """A page asks several sums of one queryset of rows (kept under the rows' SQL and what is summed): each
    read again from the cache is the figure the database gives for it."""
    from billing.ledger.selectors import as_of

    rows = reports.report_rows(usage.tenants.alice, MARCH)
    figures = lambda: (reports.totals(rows), reports.by_day(rows), reports.by_workspace(rows),  # noqa: E731
                       reports.by_gpu_model(rows), reports.jobs_of(rows), reports.jobs_of(rows, most_idle=1), as_of(rows))
    first = figures()
    with CaptureQueriesContext(connection) as queries:
        assert figures() == first  # all of them from the cache
    assert aggregates(queries.captured_queries) == []
    totals, by_day, by_workspace, by_model, jobs, most_idle, latest = first
    lines = ChargeLine.objects.filter(workspace=usage.tenants.vision, day__gte=MARCH.start, day__lte=MARCH.end)
    assert [t.cost for t in totals] == [lines.aggregate(s=Sum("cost"))["s"]]
    assert {d["day"] for d in by_day} == set(lines.values_list("day", flat=True))
    assert [w["workspace__slug"] for w in by_workspace] == ["vision-lab"]
    assert {m["gpu_model"] for m in by_model} == set(lines.values_list("gpu_model", flat=True))
    assert {j["job_id"] for j in jobs} == set(lines.exclude(job=None).values_list("job_id", flat=True))
    assert len(most_idle) == 1 and most_idle[0]["job_id"] in {j["job_id"] for j in jobs}
    assert latest is not None


def test_a_queryset_is_compiled_once_for_all_its_kept_reads(usage):
    """The key's SQL is compiled once per queryset: compiling it was most of a kept read's cost."""
    from billing.ledger.kept import ledger_read

    rows = reports.report_rows(usage.tenants.alice, MARCH)
    compiled = []
    query_class = type(rows.query)

    class Counting(query_class):
        def sql_with_params(self):
            compiled.append(1)
            return super().sql_with_params()

    rows.query.__class__ = Counting
    assert ledger_read(rows, lambda: 1, also=("one",)) == 1
    assert ledger_read(rows, lambda: 2, also=("two",)) == 2
    assert ledger_read(rows, lambda: 3, also=("one",)) == 1  # kept
    assert len(compiled) == 1
