"""Every change is audited: the console's own services and the Django admin (forms and actions)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.console.models import AuditEntry


@pytest.mark.django_db
def test_console_queue_change_records_who_what_and_the_values(admin_client, cluster, clock):
    admin_client.post("/console/queues/nlp-group/", {
        "name": "nlp-group", "parent": "root", "deserved_gpus": "20", "over_quota_weight": "2", "priority": "0"})
    entry = AuditEntry.objects.get()
    assert (entry.username, entry.source, entry.action, entry.target_type) == (
        "admin", "console", "change", "scheduling.queue")
    assert entry.changes == {"deserved_gpus": ["16", "20"], "over_quota_weight": ["1", "2"]}
    assert entry.time == clock.now


@pytest.mark.django_db
def test_admin_form_changes_are_audited(admin_client, cluster):
    from scheduling.models import Queue

    queue = Queue.objects.get(name="community")
    response = admin_client.post(f"/admin/scheduling/queue/{queue.pk}/change/", {
        "name": "community", "parent": queue.parent_id, "deserved_gpus": "0", "over_quota_weight": "3",
        "limit_gpus": "", "priority": "0", "preemptible_only": "on",
        "queueaccess_set-TOTAL_FORMS": "0", "queueaccess_set-INITIAL_FORMS": "0",
        "queueaccess_set-MIN_NUM_FORMS": "0", "queueaccess_set-MAX_NUM_FORMS": "1000",
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditEntry.objects.get(source="admin")
    assert (entry.username, entry.action, entry.target_type, entry.target_repr) == (
        "admin", "change", "scheduling.queue", "community")
    assert entry.message == "Changed Over-quota weight."  # the admin names the field by its form label


@pytest.mark.django_db
def test_admin_actions_are_audited(admin_client, cluster):
    from billing.metering.tokens import create_node_token
    from scheduling.models import Node

    token, _ = create_node_token(Node.objects.get(name="h100-01"))
    response = admin_client.post("/admin/billing/nodetoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked is not None
    entry = AuditEntry.objects.get(source="admin")
    assert entry.action == "admin action: revoke" and entry.target_type == "billing.nodetoken"
    assert entry.target_id == str(token.pk)


@pytest.mark.django_db
def test_audit_page_lists_and_filters(admin_client, cluster, operator):
    from portal.console import audit

    audit.record(operator, "cordon", target_type_name="scheduling.node", target_id="1", target_repr="h100-01")
    audit.record(operator, "change", target_type_name="scheduling.queue", target_id="2", target_repr="vision-lab")
    page = admin_client.get("/console/audit/").content.decode()
    assert "h100-01" in page and "vision-lab" in page
    page = admin_client.get("/console/audit/?target=scheduling.node").content.decode()
    assert "h100-01" in page and "vision-lab" not in page
    page = admin_client.get("/console/audit/?q=vision").content.decode()
    assert "h100-01" not in page.split('id="audit-table"')[1] and "vision-lab" in page
    assert admin_client.get("/console/audit/?start=yesterday").status_code == 400


@pytest.mark.django_db
def test_price_tables_tokens_pools_and_members_are_audited(admin_client, cluster, clock):
    future = (timezone.localtime(clock.now) + timedelta(days=2)).strftime("%Y-%m-%d %H:%M")
    response = admin_client.post("/console/prices/", {
        "name": "Next", "currency": "USD", "effective_from": future, "cpu_core_hour": "0.03",
        "memory_gib_hour": "0.004", "priority_base": "1", "priority_step": "0.01", "offpeak_windows": "22:00-06:00",
        "offpeak_discount": "0.5", "spot_discount": "0.6", "gpu_rates": "nvidia H100-80GB 3.10\namd MI300X-192GB 2.5"})
    assert response.status_code == 302
    response = admin_client.post("/console/tokens/", {"node": "h100-01"})
    assert response.status_code == 200 and "gpn_" in response.content.decode()
    admin_client.post("/console/pools/rtx4090/", {"placement": "spread", "sharing": "standard",
                                                   "timeslice_replicas": "4", "mig_layout": ""})
    admin_client.post("/console/workspaces/vision-lab/", {"username": "bob", "role": "viewer"})
    actions = list(AuditEntry.objects.order_by("id").values_list("target_type", "action"))
    assert actions == [("billing.pricetable", "create"), ("billing.nodetoken", "create"),
                       ("scheduling.nodepool", "change"), ("portal.membership", "create")]
    pool = AuditEntry.objects.get(target_type="scheduling.nodepool")
    assert pool.changes == {"placement": ["default", "spread"]}


@pytest.mark.django_db
def test_admin_deletions_are_audited_one_or_many(admin_client, cluster):
    from scheduling.models import Queue

    for name in ("tmp-a", "tmp-b", "tmp-c"):
        Queue.objects.create(name=name)
    one = Queue.objects.get(name="tmp-a")
    assert admin_client.post(f"/admin/scheduling/queue/{one.pk}/delete/", {"post": "yes"}).status_code == 302
    many = list(Queue.objects.filter(name__in=("tmp-b", "tmp-c")).values_list("pk", flat=True))
    response = admin_client.post("/admin/scheduling/queue/", {"action": "delete_selected", "post": "yes",
                                                               "_selected_action": many})
    assert response.status_code == 302 and not Queue.objects.filter(name__startswith="tmp-").exists()
    entries = list(AuditEntry.objects.filter(action="delete").order_by("id"))
    assert [e.target_repr for e in entries] == ["tmp-a", "tmp-b, tmp-c"]
    assert all(e.source == "admin" and e.username == "admin" for e in entries)
