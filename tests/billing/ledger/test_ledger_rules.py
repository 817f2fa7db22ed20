"""The ledger's rules: open hours are provisional and recomputed, closed hours and closed months never
change, corrections are adjustments; budgets act within the ingest that crosses them; the costs API
pages its rows, refuses bad parameters and shows a tenant only its own workspaces."""

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied
from rest_framework.test import APIClient

from billing.ledger.posting import post_ledger
from billing.ledger.services import LedgerError, add_adjustment, close_period
from billing.metering.tokens import create_node_token
from billing.models import Budget, BudgetAlert, ChargeLine
from billing.reports.services import BudgetError, check_budget_allows_submit, set_budget
from billing.services import submit_quoted_job
from portal.console.models import AuditEntry
from scheduling.errors import Conflict
from scheduling.models import Job, JobState, Node, Replica

pytestmark = pytest.mark.django_db
SPEC = """name: {name}
{extra}roles:
  - name: main
    image: busybox
    resources: {{gpu: 1, cpu: 1, memory: 4Gi}}
    nodePool: h100
"""
NOON = datetime(2026, 3, 10, 12, tzinfo=UTC)


def running(user, workspace, name, start, *, node="h100-01", extra=""):
    job = submit_quoted_job(user=user, workspace=workspace, spec=SPEC.format(name=name, extra=extra))
    replica = Replica.objects.create(job=job, role="main", index=0, state=JobState.RUNNING,
                                     node=Node.objects.get(name=node), gpu_indices=[0],
                                     slice={"kind": "whole", "gpu_milli": 1000}, started=start)
    job.state, job.started = JobState.RUNNING, start
    job.save(update_fields=["state", "started"])
    return job, replica


def lines(job):
    return list(ChargeLine.objects.filter(job=job).order_by("hour"))


def test_the_open_hour_is_provisional_and_recomputed_then_frozen(cluster, clock):
    clock.now = NOON + timedelta(minutes=30)
    job, replica = running(cluster.alice, cluster.vision, "open", NOON)
    post_ledger(now=clock.now)
    (line,) = lines(job)
    assert line.provisional and line.cost == Decimal("1.52")  # half an hour at 3.04
    clock.now = NOON + timedelta(minutes=45)
    post_ledger(now=clock.now)
    (line,) = lines(job)
    assert line.provisional and line.cost == Decimal("2.28")  # recomputed, not added
    clock.now = NOON + timedelta(hours=1, minutes=10)  # the 12:00 hour ended more than the grace ago
    post_ledger(now=clock.now)
    first, second = lines(job)
    assert not first.provisional and first.cost == Decimal("3.04") and second.provisional
    Replica.objects.filter(pk=replica.pk).update(started=NOON - timedelta(hours=5))  # history rewritten late
    post_ledger(now=clock.now + timedelta(minutes=1))
    assert lines(job)[0].cost == Decimal("3.04") and lines(job)[0].hour == NOON  # a final hour never changes


def test_a_closed_month_never_changes_and_corrections_are_adjustments(cluster, clock):
    clock.now = datetime(2026, 2, 27, 10, tzinfo=UTC)
    job, replica = running(cluster.alice, cluster.vision, "feb", clock.now)
    Replica.objects.filter(pk=replica.pk).update(state=JobState.SUCCEEDED, ended=clock.now + timedelta(hours=2))
    with pytest.raises(Conflict):  # February has not ended
        close_period(user=cluster.finance, workspace=cluster.vision, month=clock.now.date())
    clock.now = datetime(2026, 3, 1, 0, 10, tzinfo=UTC)
    with pytest.raises(PermissionDenied):
        close_period(user=cluster.alice, workspace=cluster.vision, month=datetime(2026, 2, 1).date())
    closed = close_period(user=cluster.finance, workspace=cluster.vision, month=datetime(2026, 2, 1).date())
    assert closed.total == Decimal("6.08")
    with pytest.raises(Conflict):
        close_period(user=cluster.finance, workspace=cluster.vision, month=datetime(2026, 2, 1).date())
    before = list(ChargeLine.objects.values_list("pk", "cost", "provisional"))
    post_ledger(now=clock.now + timedelta(hours=3))
    assert list(ChargeLine.objects.values_list("pk", "cost", "provisional")) == before
    credit = add_adjustment(user=cluster.finance, workspace=cluster.vision, amount="-2.5", reason="slow disks")
    assert (credit.category, credit.cost, credit.period, credit.author) == (
        "Credit", Decimal("-2.50"), datetime(2026, 3, 1).date(), cluster.finance)


@pytest.mark.parametrize("amount, reason", [("0.001", "x"), ("nan", "x"), ("1e13", "x"), ("abc", "x"), ("5", ""),
                                            ("5", "x" * 501), ("5", "a\x00b")])
def test_bad_adjustments_are_refused_and_change_nothing(cluster, clock, amount, reason):
    with pytest.raises(LedgerError):
        add_adjustment(user=cluster.finance, workspace=cluster.vision, amount=amount, reason=reason)
    assert not ChargeLine.objects.exists()


def test_only_finance_adjusts_and_the_page_records_it_in_the_audit_log(cluster, clock, client):
    with pytest.raises(PermissionDenied):
        add_adjustment(user=cluster.alice, workspace=cluster.vision, amount="5", reason="mine")
    client.force_login(cluster.finance)
    response = client.post("/reports/adjustments/vision-lab/", {"amount": "12.345", "reason": "late GPU invoice"})
    assert response.status_code == 302
    line = ChargeLine.objects.get()
    assert (line.cost, line.category) == (Decimal("12.35"), "Adjustment")
    entry = AuditEntry.objects.get(action="adjust")
    assert entry.username == "finance" and "late GPU invoice" in entry.message
    client.force_login(cluster.bob)  # not a member of vision-lab
    assert client.post("/reports/adjustments/vision-lab/", {"amount": "1", "reason": "x"}).status_code == 404


def ingest(node_name, replica, at, util=90.0):
    token, raw = create_node_token(Node.objects.get(name=node_name))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    sample = {"id": str(uuid.uuid4()), "node": node_name, "ts": at.isoformat(), "gpu_uuid": f"GPU-{node_name}-0",
              "gpu_index": 0, "pod_uid": str(replica.uid), "gpu_util_pct": util, "mem_used_mib": 1000,
              "interval_s": 10.0}
    return api.post("/api/v1/agent/usage", {"node": node_name, "samples": [sample]}, format="json")


def test_a_budget_crossing_fires_within_one_ingest_with_the_real_percentage(cluster, clock, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    clock.now = NOON
    job, replica = running(cluster.alice, cluster.vision, "burner", NOON - timedelta(hours=3))
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="2", block_at_limit=True)
    assert not BudgetAlert.objects.exists()
    response = ingest("h100-01", replica, clock.now)
    assert response.status_code == 200 and response.json()["accepted"]
    alerts = {a.threshold: a for a in BudgetAlert.objects.all()}
    assert sorted(alerts) == [50, 80, 100]
    assert alerts[80].spent == Decimal("9.12") and alerts[80].percent == Decimal("456.0")  # 3 h at 3.04 of 2.00
    assert len(mail.outbox) == 1, [m.subject for m in mail.outbox]
    assert "456.0 %" in mail.outbox[0].subject and "spent $9.12 of its $2.00 budget" in mail.outbox[0].body, mail.outbox[0].body
    sent = len(mail.outbox)
    ingest("h100-01", replica, clock.now + timedelta(seconds=10))
    assert BudgetAlert.objects.count() == 3 and len(mail.outbox) == sent  # each threshold once a period
    assert "spent" in (check_budget_allows_submit(cluster.vision) or "")


def test_thresholds_are_editable_and_validated(cluster):
    budget = set_budget(user=cluster.finance, workspace=cluster.vision, amount="100", thresholds="90, 25")
    assert budget.thresholds == "25,90"
    for bad in ("abc", "0", "2000", ",".join(str(n) for n in range(1, 13))):
        with pytest.raises(BudgetError):
            set_budget(user=cluster.finance, workspace=cluster.vision, amount="100", thresholds=bad)
    assert Budget.objects.get().thresholds == "25,90"


def test_the_hard_limit_can_suspend_preemptible_jobs(cluster, clock):
    clock.now = NOON
    steady, replica = running(cluster.alice, cluster.vision, "steady", NOON - timedelta(hours=2))
    spot, spot_replica = running(cluster.alice, cluster.vision, "spot", NOON - timedelta(hours=2), node="h100-02",
                                 extra="preemptible: true\nqueue: community\n")
    with pytest.raises(PermissionDenied):  # only an owner stops jobs at the limit
        set_budget(user=cluster.finance, workspace=cluster.vision, amount="5", suspend_preemptible=True)
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="5", suspend_preemptible=True)
    ingest("h100-01", replica, clock.now)
    spot.refresh_from_db()
    steady.refresh_from_db()
    assert spot.state == JobState.PENDING and spot.pending_code == "budget_suspended"
    assert Replica.objects.get(pk=spot_replica.pk).ended == clock.now
    assert steady.state == JobState.RUNNING
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="500", suspend_preemptible=True)
    assert Job.objects.get(pk=spot.pk).pending_code == "waiting_for_cycle"  # a higher budget lets it go


def test_costs_api_pages_rows_and_refuses_bad_parameters(cluster, clock):
    clock.now = NOON
    job, replica = running(cluster.alice, cluster.vision, "long", NOON - timedelta(days=9))
    post_ledger(now=clock.now)
    api = APIClient()
    api.force_authenticate(cluster.carol)
    query = {"workspace": "vision-lab", "start": "2026-03-01", "end": "2026-03-10", "group_by": "day"}
    body = api.get("/api/v1/costs/", query).json()
    assert body["count"] == 10 and len(body["rows"]) == 10 and body["pages"] == 1
    assert Decimal(body["total"]) == sum(Decimal(r["cost"]) for r in body["rows"])
    from billing.reports import selectors

    filters = selectors.parse_filters(query, today=NOON.date())
    first = selectors.costs(cluster.carol, filters, page=1, page_size=4)
    third = selectors.costs(cluster.carol, filters, page=3, page_size=4)
    assert len(first.rows) == 4 and len(third.rows) == 2 and first.total == third.total == Decimal(body["total"])
    for bad in ({"group_by": "colour"}, {"page": "0"}, {"page": "x"}, {"start": "2026-13-01"}, {"colour": "red"},
                {"queue": "a\x00b"}, {"end": "0001-01-01"}):
        response = api.get("/api/v1/costs/", {**query, **bad})
        assert response.status_code == 400, bad
        assert response["Content-Type"].startswith("application/problem+json")
    api.force_authenticate(cluster.bob)
    assert api.get("/api/v1/costs/", query).status_code == 404  # another tenant's workspace
    assert api.get("/api/v1/costs/", {"start": "2026-03-01", "end": "2026-03-10"}).json()["total"] == "0.00"
