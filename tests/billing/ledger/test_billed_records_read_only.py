"""Billed records cannot be rewritten, the Django admin included: a submitted job, its events, usage samples,
ledger lines and closed months are shown to operators but never changed, added or deleted there (even by a
superuser), and saving or deleting one by hand is refused; corrections are adjustments."""

import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from tests_job_specs import job_spec

from billing.ledger.services import add_adjustment, close_period
from billing.models import BilledRecordIsFinal, ChargeLine, ClosedPeriod, UsageSample
from billing.services import submit_quoted_job
from scheduling.models import Job, JobEvent, Node

pytestmark = pytest.mark.django_db
NOON = datetime(2026, 3, 10, 12, tzinfo=UTC)


@pytest.fixture
def billed(cluster, clock):
    """A submitted job with a final ledger line, a usage sample, an adjustment and a closed month."""
    clock.now = NOON
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("finetune"))
    line = ChargeLine.objects.create(hour=NOON, day=NOON.date(), period=date(2026, 3, 1), charge_start=NOON,
                                     charge_end=NOON + timedelta(hours=1), workspace=cluster.vision, job=job,
                                     job_name=job.name, cost=Decimal("3.00"), currency="USD", provisional=False,
                                     computed_at=NOON)
    sample = UsageSample.objects.create(id=uuid.uuid4(), node=Node.objects.get(name="h100-01"), ts=NOON,
                                        gpu_uuid="GPU-h100-01-0", gpu_index=0, gpu_util_pct=50, interval_s=10)
    credit = add_adjustment(user=cluster.finance, workspace=cluster.vision, amount="-1", reason="slow disks")
    clock.now = datetime(2026, 4, 2, 12, tzinfo=UTC)
    closed = close_period(user=cluster.finance, workspace=cluster.vision, month=date(2026, 3, 1))
    return {"job": job, "line": line, "sample": sample, "credit": credit, "closed": closed}


def admin_url(obj, action="change"):
    meta = obj._meta
    return f"/admin/{meta.app_label}/{meta.model_name}/{obj.pk}/{action}/"


def snapshot(obj):
    return {f.attname: getattr(type(obj).objects.get(pk=obj.pk), f.attname) for f in obj._meta.concrete_fields}


@pytest.mark.parametrize("name", ["job", "line", "sample", "credit", "closed"])
def test_a_superuser_can_look_but_not_change_or_delete(client, cluster, billed, name):
    obj = billed[name]
    before = snapshot(obj)
    client.force_login(cluster.admin)  # staff and superuser
    view = client.get(admin_url(obj))
    assert view.status_code == 200 and 'name="_save"' not in view.content.decode()  # a read-only page
    fields = {f.name: "1" for f in obj._meta.concrete_fields if f.name != "id"}
    assert client.post(admin_url(obj), {**fields, "_save": "Save"}).status_code == 403
    assert client.post(admin_url(obj, "delete"), {"post": "yes"}).status_code == 403
    changelist = f"/admin/{obj._meta.app_label}/{obj._meta.model_name}/"
    client.post(changelist, {"action": "delete_selected", "_selected_action": [str(obj.pk)], "post": "yes"})
    assert client.get(f"{changelist}add/").status_code == 403
    assert snapshot(obj) == before


def test_job_events_are_history(client, cluster, billed):
    event = JobEvent.objects.filter(job=billed["job"]).first()
    client.force_login(cluster.admin)
    assert client.post(admin_url(event), {"kind": "succeeded", "state": "Succeeded"}).status_code == 403
    assert client.post(admin_url(event, "delete"), {"post": "yes"}).status_code == 403
    assert JobEvent.objects.filter(pk=event.pk, kind=event.kind).exists()


def test_a_job_page_in_the_admin_has_no_editable_inline(client, cluster, billed):
    client.force_login(cluster.admin)
    page = client.get(admin_url(billed["job"])).content.decode()
    assert "finetune" in page and 'name="_save"' not in page
    assert 'name="events-0-kind"' not in page and "-DELETE" not in page  # events shown as text, not inputs


@pytest.mark.parametrize("name", ["line", "sample", "credit", "closed"])
def test_saving_or_deleting_a_billed_record_by_hand_is_refused(billed, name):
    obj = type(billed[name]).objects.get(pk=billed[name].pk)
    before = snapshot(obj)
    with pytest.raises(BilledRecordIsFinal):
        obj.save()
    with pytest.raises(BilledRecordIsFinal):
        obj.delete()
    assert snapshot(obj) == before


def test_the_ledger_still_writes_new_lines(billed, cluster):
    assert ChargeLine.objects.filter(category="Credit").count() == 1
    assert ClosedPeriod.objects.filter(workspace=cluster.vision).count() == 1
    add_adjustment(user=cluster.finance, workspace=cluster.vision, amount="2", reason="late invoice")
    assert ChargeLine.objects.filter(category="Adjustment", period=date(2026, 4, 1)).count() == 1
    assert Job.objects.filter(pk=billed["job"].pk).exists()
