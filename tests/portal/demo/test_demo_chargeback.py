"""The demo's finance: its pools charge idle capacity back (portal.demo.finance), so on the demo month, and on
the month before once it is posted, direct cost plus idle shares is the priced capacity to the cent; and with
the demo's USD/CNY rates a consolidated USD report of the USD and CNY workspaces is the sum of the converted
lines. The demo is played over a few days across a month's end (the whole month: test_demo_history.py), and
loaded once for the module, committed, as `make run` loads it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.test import Client

from billing import chargeback
from billing.models import ChargebackPosting, ChargeLine, ExchangeRate
from billing.pricing import quantize_money
from billing.time_zone import platform_tz
from portal.demo import chinese, cluster, finance, prices, tenants
from portal.demo.usage import load_demo_usage
from portal.models import Membership, Role, Workspace
from scheduling.models import NodePool

DAYS = 3


@dataclass(frozen=True)
class Played:
    now: datetime  # when the played days end: the second day of a month
    months: tuple[date, date]  # the month before, and the one of `now`


def demo_end(today: datetime) -> datetime:
    """Noon on the 2nd of last month: the days played cross a month's end, and that month is long final."""
    this_month = today.astimezone(platform_tz()).date().replace(day=1)
    second = (this_month - timedelta(days=1)).replace(day=2)
    return datetime.combine(second, time(12), tzinfo=platform_tz())


@pytest.fixture(scope="module")
def played(django_db_setup, django_db_blocker, module_clock):
    with django_db_blocker.unblock():
        tenants.load_tenants()
        cluster.load_cluster()
        cluster.load_queues()
        prices.load_prices()
        chinese.load_chinese_team()
        finance.load_exchange_rates()
        finance.load_chargeback_policies()
        now = demo_end(module_clock.now)
        assert load_demo_usage(days=DAYS, now=now) > 0
        before = (now.date().replace(day=1) - timedelta(days=1)).replace(day=1)
        chargeback.post_due_chargebacks(now=now)  # what load_all does: the month before, now final
        yield Played(now=now, months=(before, now.date().replace(day=1)))
        call_command("flush", interactive=False, verbosity=0)


def test_every_demo_pool_charges_its_idle_capacity_back(db, played):
    rules = chargeback.policies()
    assert set(rules) == set(cluster.DEMO_POOLS) == set(NodePool.objects.values_list("name", flat=True))
    assert {p.policy for p in rules.values()} == {"proportional", "by-quota"}
    finance.load_chargeback_policies()  # idempotent, and an operator's later choice stays
    assert {name: p.policy for name, p in chargeback.policies().items()} == {
        name: p.policy for name, p in rules.items()}


def test_the_invariant_holds_on_the_demo_month_to_the_cent(db, played):
    before, current = played.months
    assert ChargeLine.objects.filter(period=before, charge_kind="").exists()
    assert ChargeLine.objects.filter(period=current, charge_kind="").exists()
    for month in played.months:
        figures = chargeback.chargeback(month)
        assert figures.pools and all(p.policy != "showback" for p in figures.pools)
        for pool in figures.pools:
            assert pool.uncharged == 0 and pool.capacity_cost > 0, pool.pool
            assert pool.direct_cost + pool.idle_share == pool.capacity_cost, pool.pool
            assert all(v == v.quantize(Decimal("0.01")) for v in [*pool.direct.values(), *pool.shares.values()])
        assert sum((r.total for r in figures.rows), Decimal(0)) == figures.capacity_cost, month
        assert {r.workspace for r in figures.rows} >= {"vision-lab", "nlp-group"}
        assert sum(p.direct_cost for p in figures.pools) > 0
    posted = chargeback.chargeback(before)
    assert not posted.provisional and ChargebackPosting.objects.filter(period=before).count() == len(
        cluster.DEMO_POOLS)
    assert chargeback.chargeback(current).provisional


def test_the_posted_month_is_the_workspaces_idle_share_lines(db, played):
    before, _ = played.months
    figures = chargeback.chargeback(before)
    lines = ChargeLine.objects.filter(period=before, charge_kind=chargeback.IDLE_SHARE)
    usd = {r.workspace: r.idle_share for r in figures.rows}
    for slug in ("vision-lab", "nlp-group"):
        assert sum(lines.filter(workspace__slug=slug).values_list("cost", flat=True)) == usd[slug], slug
    ai_lab = lines.filter(workspace__slug="ai-lab")
    assert set(ai_lab.values_list("currency", flat=True)) <= {"CNY"}  # the workspace's currency, converted
    admin = Client()
    admin.force_login(tenants_admin())
    body = admin.get("/api/v1/chargeback/", {"month": f"{before:%Y-%m}"}).json()
    assert sum(Decimal(r["total"]) for r in body["rows"]) == Decimal(body["capacity_cost"])


def tenants_admin():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="admin")


def converted_by_hand(lines) -> Decimal:
    """Each line's cost in USD at its own day's stored USD/CNY rate (inverted to the rate table's ten places),
    rounded once per line."""
    rates = dict(ExchangeRate.objects.filter(base="USD", quote="CNY").values_list("day", "rate"))
    total = Decimal(0)
    for currency, day, cost in lines.values_list("currency", "day", "cost"):
        total += cost if currency == "USD" else quantize_money(cost * (1 / rates[day]).quantize(Decimal("1e-10")), "USD")
    return total


def test_a_consolidated_usd_report_of_the_usd_and_cny_workspaces_is_the_sum_of_the_converted_lines(db, played):
    finance_user = tenants_admin().__class__.objects.get(username="finance")
    Membership.objects.get_or_create(user=finance_user, workspace=Workspace.objects.get(slug="ai-lab"),
                                     defaults={"role": Role.FINANCE})
    client = Client()
    client.force_login(finance_user)
    start, end = played.months[0], played.now.date()
    lines = ChargeLine.objects.filter(workspace__slug__in=["vision-lab", "nlp-group", "ai-lab"],
                                      day__gte=start, day__lte=end)
    assert set(lines.values_list("currency", flat=True)) == {"USD", "CNY"}
    expected = converted_by_hand(lines)
    for group in ("workspace", "user", "day"):
        body = client.get("/api/v1/costs/", {"start": start, "end": end, "group_by": group, "currency": "USD"}).json()
        assert body["currency"] == "USD" and Decimal(body["total"]) == expected, group
        assert sum(Decimal(r["cost"]) for r in body["rows"]) == expected, group
    rows = {r["workspace"]: r for r in client.get("/api/v1/costs/", {"start": start, "end": end,
                                                                     "group_by": "workspace", "currency": "USD"}
                                                  ).json()["rows"]}
    assert rows["ai-lab"]["x_OriginalCurrency"] == "CNY" and rows["vision-lab"]["x_OriginalCurrency"] == "USD"
    assert Decimal(rows["ai-lab"]["x_OriginalCost"]) == sum(
        lines.filter(workspace__slug="ai-lab").values_list("cost", flat=True))
