"""Chargeback: a pool's priced capacity less what its lines billed, shared out by the pool's policy, so
that (but for showback) direct cost plus shares is the priced capacity to the cent; posted once when the
month is final, as idle-share ledger lines; the API for operators and finance."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing import chargeback
from billing.accounts import assign_workspace, save_account
from billing.models import BillingAccount, ChargebackPosting, ChargeLine, LedgerCursor
from scheduling.models import NodePool, QueueAccess
from tests.factories import MembershipFactory, QueueAccessFactory, QueueFactory, WorkspaceFactory

MARCH = date(2026, 3, 1)
APRIL_5 = datetime(2026, 4, 5, 12, tzinfo=UTC)
H100_MONTH = Decimal(16 * 24 * 31 * 3)  # the world's h100 pool: 16 GPUs at 3.00 per GPU-hour, all of March


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, tzinfo=UTC)


def line(workspace, hour: datetime, *, pool="h100", allocated="1", cost="3.00", currency="USD"):
    return ChargeLine.objects.create(
        category=ChargeLine.Category.USAGE, resource=ChargeLine.Resource.COMPUTE, hour=hour, day=hour.date(),
        period=hour.date().replace(day=1), charge_start=hour, charge_end=hour + timedelta(hours=1),
        workspace=workspace, pool=pool, allocated_gpu_hours=Decimal(allocated), cost=Decimal(cost),
        currency=currency, provisional=False, computed_at=hour)


def final_until(when: datetime) -> None:
    LedgerCursor.objects.update_or_create(pk=1, defaults={"closed_until": when, "posted_until": when})


def policy(name: str, rule: str, account=None) -> None:
    chargeback.save_policy(NodePool.objects.get(name=name), rule, account)


def h100(figures) -> chargeback.PoolChargeback:
    return next(p for p in figures.pools if p.pool == "h100")


@pytest.fixture
def used(cluster, clock):
    clock.now = APRIL_5
    line(cluster.vision, at(3, 10), allocated="4", cost="12.00")
    line(cluster.nlp, at(4, 11), allocated="1", cost="3.00")
    return cluster


def test_showback_charges_no_one_and_counts_what_the_pool_billed(used):
    figures = chargeback.chargeback(MARCH)
    assert h100(figures).policy == "showback" and h100(figures).shares == {}
    assert h100(figures).capacity_cost == Decimal("15.00")
    assert figures.total == figures.capacity_cost and figures.provisional


def test_proportional_shares_the_rest_by_allocated_gpu_hours_to_the_cent(used):
    policy("h100", "proportional")
    figures = chargeback.chargeback(MARCH)
    pool = h100(figures)
    assert pool.capacity_cost == H100_MONTH
    rest = H100_MONTH - Decimal("15.00")
    assert pool.shares == {used.vision.pk: Decimal("28557.60"), used.nlp.pk: Decimal("7139.40")}
    assert sum(pool.shares.values()) == rest
    rows = {r.workspace: r for r in figures.rows}
    assert rows["vision-lab"].total == Decimal("12.00") + Decimal("28557.60")
    assert figures.total == figures.capacity_cost


def test_by_quota_shares_by_deserved_gpus_a_shared_queue_split_evenly(used):
    QueueAccess.objects.all().delete()
    own, shared = QueueFactory(name="vision-own", deserved_gpus=6), QueueFactory(name="both", deserved_gpus=4)
    QueueAccessFactory(workspace=used.vision, queue=own)
    QueueAccessFactory(workspace=used.vision, queue=shared)
    QueueAccessFactory(workspace=used.nlp, queue=shared)
    policy("h100", "by-quota")
    pool = h100(chargeback.chargeback(MARCH))
    rest = H100_MONTH - Decimal("15.00")
    # vision 6 + 2, nlp 2: four fifths and one fifth
    assert pool.shares == {used.vision.pk: rest * 4 / 5, used.nlp.pk: rest / 5}


def test_to_account_charges_the_accounts_workspaces_sub_accounts_included(used):
    it = save_account(slug="it", name="IT", currency="USD")
    team = save_account(slug="it-ops", name="IT operations", currency="USD", parent=it)
    ops = WorkspaceFactory(slug="ops")
    assign_workspace(ops, team)
    policy("h100", "to-account", it)
    figures = chargeback.chargeback(MARCH)
    assert h100(figures).shares == {ops.pk: H100_MONTH - Decimal("15.00")}
    assert {r.workspace: r.account for r in figures.rows}["ops"] == "it-ops"
    assert figures.total == figures.capacity_cost


def test_a_rest_below_zero_is_shared_as_a_rebate_and_still_adds_up(used):
    policy("rtx4090", "proportional")  # 8 GPUs at 0.40: 2,380.80 a month
    line(used.vision, at(5), pool="rtx4090", allocated="1", cost="2000.00")
    line(used.nlp, at(5), pool="rtx4090", allocated="2", cost="1000.00")
    pool = next(p for p in chargeback.chargeback(MARCH).pools if p.pool == "rtx4090")
    assert pool.capacity_cost == Decimal("2380.80")
    assert sum(pool.shares.values()) == Decimal("2380.80") - Decimal("3000.00")
    assert pool.shares[used.nlp.pk] == Decimal("-412.80")  # two thirds of -619.20


def test_a_month_nobody_used_is_shared_evenly_by_queue_access_else_left_uncharged(cluster, clock):
    clock.now = APRIL_5
    policy("h100", "proportional")
    pool = h100(chargeback.chargeback(MARCH))
    with_access = set(QueueAccess.objects.values_list("workspace_id", flat=True))
    assert set(pool.shares) == with_access and len(set(pool.shares.values()) - {max(pool.shares.values())}) <= 1
    assert pool.idle_share == H100_MONTH and pool.uncharged == 0
    QueueAccess.objects.all().delete()
    pool = h100(chargeback.chargeback(MARCH))
    assert pool.shares == {} and pool.uncharged == H100_MONTH


def test_policies_refuse_what_cannot_be_charged(cluster):
    pool = NodePool.objects.get(name="h100")
    with pytest.raises(chargeback.ChargebackError) as error:
        chargeback.save_policy(pool, "by-headcount")
    assert "policy" in error.value.errors
    with pytest.raises(chargeback.ChargebackError) as error:
        chargeback.save_policy(pool, "to-account")
    assert "account" in error.value.errors
    empty = save_account(slug="empty", name="Empty", currency="USD")
    with pytest.raises(chargeback.ChargebackError) as error:
        chargeback.save_policy(pool, "to-account", empty)
    assert "holds no workspace" in str(error.value)
    assert not pool.__class__.objects.filter(chargeback__isnull=False).exists()


def test_a_final_month_is_posted_once_as_idle_share_lines(used, clock):
    policy("h100", "proportional")
    with pytest.raises(chargeback.ChargebackError):
        chargeback.post_chargeback(MARCH)  # the ledger is not final up to April yet
    final_until(datetime(2026, 4, 1, 1, tzinfo=UTC))
    assert chargeback.post_due_chargebacks(now=datetime(2026, 5, 2, tzinfo=UTC)) == 0  # only the last month
    assert chargeback.post_due_chargebacks() == 1
    assert chargeback.post_due_chargebacks() == 0
    shares = ChargeLine.objects.filter(charge_kind=chargeback.IDLE_SHARE).order_by("cost")
    assert [(s.workspace.slug, s.cost, s.provisional) for s in shares] == [
        ("nlp-group", Decimal("7139.40"), False), ("vision-lab", Decimal("28557.60"), False)]
    assert shares[0].hour == datetime(2026, 3, 31, 23, tzinfo=UTC) and shares[0].period == MARCH
    posted = chargeback.chargeback(MARCH)
    assert not posted.provisional and posted.total == posted.capacity_cost == H100_MONTH + 0
    # a later policy change or a new node leaves the posted month as it was
    policy("h100", "showback")
    assert chargeback.chargeback(MARCH).capacity_cost == H100_MONTH
    assert ChargebackPosting.objects.filter(period=MARCH).count() == NodePool.objects.count()


def test_the_pools_direct_cost_leaves_idle_shares_storage_and_adjustments_out(used):
    policy("h100", "proportional")
    ChargeLine.objects.create(
        category=ChargeLine.Category.ADJUSTMENT, hour=at(6), day=date(2026, 3, 6), period=MARCH,
        charge_start=at(6), charge_end=at(6, 1), workspace=used.vision, cost=Decimal("-50.00"), currency="USD",
        provisional=False, computed_at=at(6), reason="goodwill")
    assert h100(chargeback.chargeback(MARCH)).direct_cost == Decimal("15.00")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(usage=st.lists(st.tuples(st.sampled_from(["vision", "nlp", "third"]), st.integers(1, 30),
                                st.decimals("0", "40", places=3), st.decimals("0", "500", places=2)),
                      max_size=12),
       rule=st.sampled_from(["proportional", "by-quota", "to-account"]))
def test_direct_plus_shares_is_the_priced_capacity_for_any_usage(cluster, clock, usage, rule):
    clock.now = APRIL_5
    ChargeLine.objects.all().delete()
    third = WorkspaceFactory(slug="third") if not cluster.__dict__.get("third") else cluster.third
    cluster.__dict__["third"] = third
    account = None
    if rule == "to-account":
        account = BillingAccount.objects.filter(slug="acct").first() or save_account(slug="acct", name="A", currency="USD")
    if account:
        assign_workspace(third, account)
    people = {"vision": cluster.vision, "nlp": cluster.nlp, "third": third}
    for who, day, hours, cost in usage:
        line(people[who], at(day, 3), allocated=str(hours), cost=str(cost))
    policy("h100", rule, account)
    figures = chargeback.chargeback(MARCH)
    assert h100(figures).capacity_cost == H100_MONTH and h100(figures).uncharged == 0
    assert figures.total == figures.capacity_cost
    assert all(r.idle_share == r.idle_share.quantize(Decimal("0.01")) for r in figures.rows)


def test_the_api_gives_operators_the_whole_month_and_finance_their_own_rows(used, api_as):
    policy("h100", "proportional")
    body = api_as(used.admin).get("/api/v1/chargeback/?month=2026-03").json()
    assert body["currency"] == "USD" and body["provisional"] is True
    assert body["capacity_cost"] == str(H100_MONTH + 0) + ".00"
    assert sum(Decimal(r["total"]) for r in body["rows"]) == Decimal(body["capacity_cost"])
    assert {r["workspace"]: r["idle_share"] for r in body["rows"]} == {"nlp-group": "7139.40",
                                                                       "vision-lab": "28557.60"}
    finance = MembershipFactory(workspace=used.vision, role="finance").user  # vision-lab's only
    mine = api_as(finance).get("/api/v1/chargeback/?month=2026-03").json()
    assert [r["workspace"] for r in mine["rows"]] == ["vision-lab"] and mine["capacity_cost"] is None
    refused = api_as(used.alice).get("/api/v1/chargeback/?month=2026-03")
    assert refused.status_code == 403
    bad = api_as(used.admin).get("/api/v1/chargeback/?month=2026-13")
    assert bad.status_code == 400 and [e["field"] for e in bad.json()["errors"]] == ["month"]
    unknown = api_as(used.admin).get("/api/v1/chargeback/?month=2026-03&currency=XYZ")
    assert unknown.status_code == 400


def test_closing_a_workspaces_month_posts_its_idle_share_first(used, clock):
    from billing.ledger.services import close_period

    policy("h100", "proportional")
    final_until(datetime(2026, 4, 1, 1, tzinfo=UTC))
    closed = close_period(user=used.admin, workspace=used.vision, month=MARCH, now=APRIL_5)
    assert closed.total == Decimal("12.00") + Decimal("28557.60")


def test_the_console_sets_a_policy_with_an_audit_line_and_shows_the_sum(used, client):
    from portal.console.models import AuditEntry

    client.force_login(used.admin)
    page = client.post("/console/chargeback/?month=2026-03", {"pool": "h100", "policy": "proportional"})
    assert page.status_code == 302
    entry = AuditEntry.objects.get(action="chargeback policy")
    assert entry.changes == {"policy": ["showback", "proportional"]}
    shown = client.get("/console/chargeback/?month=2026-03").content.decode()
    assert 'data-capacity="35712.00" data-total="35712.00"' in shown and "Equal, to the cent." in shown
    assert 'data-workspace="nlp-group"' in shown and "7,139.40" in shown
    refused = client.post("/console/chargeback/?month=2026-03", {"pool": "h100", "policy": "to-account"})
    assert refused.status_code == 400 and "needs an account" in refused.content.decode()
    assert AuditEntry.objects.filter(action="chargeback policy").count() == 1
    assert client.get("/console/chargeback/?month=March").status_code == 400
    client.force_login(used.alice)
    assert client.get("/console/chargeback/?month=2026-03").status_code in (302, 403)


def test_a_posted_share_is_exported_as_usage_of_kind_idle_share(used, clock):
    from billing.reports import exports

    policy("h100", "proportional")
    final_until(datetime(2026, 4, 1, 1, tzinfo=UTC))
    chargeback.post_chargeback(MARCH)
    rows = [dict(zip(exports.HEADER, r, strict=True)) for r in exports.line_rows(ChargeLine.objects.filter(workspace=used.nlp))]
    share = next(r for r in rows if r["x_ChargeKind"] == "idle-share")
    assert share["ChargeCategory"] == "Usage" and share["BilledCost"] == "7139.40"
    assert "idle and unallocated capacity" in share["ChargeDescription"]
    assert {r["x_ChargeKind"] for r in rows} == {"idle-share", "usage"}


def test_lines_in_another_currency_count_at_their_days_rate_and_a_missing_rate_is_named(used):
    from billing.exchange_rates import MissingRate, add_rate

    policy("h100", "proportional")
    line(used.nlp, at(7, 2), allocated="1", cost="70.00", currency="CNY")
    with pytest.raises(MissingRate) as error:
        chargeback.chargeback(MARCH)
    assert "CNY to USD" in str(error.value) and "2026-03-07" in str(error.value)
    add_rate(base="USD", quote="CNY", day=date(2026, 3, 7), rate="7")
    figures = chargeback.chargeback(MARCH)
    assert h100(figures).direct[used.nlp.pk] == Decimal("13.00")  # 3.00 + 70 CNY at 7 per USD
    assert figures.total == figures.capacity_cost
    add_rate(base="USD", quote="CNY", day=date(2026, 3, 31), rate="7.2")
    in_yuan = chargeback.chargeback(MARCH, currency="CNY")
    assert in_yuan.currency == "CNY" and in_yuan.total == in_yuan.capacity_cost


def test_posting_reads_the_shares_currencies_and_rates_once_however_many_workspaces_share(cluster, clock):
    """Two workspaces billed in CNY or four: posting their month's shares reads the same."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from billing.exchange_rates import add_rate
    from billing.ledger.periods import month_end
    from billing.models import WorkspaceCurrency

    clock.now = APRIL_5
    policy("h100", "proportional")
    february = date(2026, 2, 1)
    sharing = {february: [WorkspaceFactory() for _ in range(2)], MARCH: [WorkspaceFactory() for _ in range(4)]}
    for month, workspaces in sharing.items():
        add_rate(base="USD", quote="CNY", day=month_end(month), rate="7")
        for workspace in workspaces:
            WorkspaceCurrency.objects.create(workspace=workspace, period=february, currency="CNY", set_at=APRIL_5)
            line(workspace, datetime(2026, month.month, 3, 10, tzinfo=UTC))
    final_until(datetime(2026, 4, 1, 1, tzinfo=UTC))
    reads = {}
    for month in sharing:
        with CaptureQueriesContext(connection) as posting:
            chargeback.post_chargeback(month)
        reads[month] = sum(q["sql"].lstrip().upper().startswith("SELECT") for q in posting.captured_queries)
    assert reads[february] == reads[MARCH]
    shares = ChargeLine.objects.filter(charge_kind=chargeback.IDLE_SHARE)
    assert shares.count() == 6 and set(shares.values_list("currency", flat=True)) == {"CNY"}
