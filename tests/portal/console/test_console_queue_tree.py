"""The queue tree editor: the tree with each queue's rules, share, allocation and pending jobs; the edit
form (labels, help, every error beside its field, success message, audit); delete with confirmation;
operators only."""

import re

import pytest
from django.contrib.messages import get_messages

from portal.console.models import AuditEntry
from scheduling.models import Job, JobState, Queue
from tests.factories import JobFactory, QueueFactory

QUEUE_PAGES = ["/console/queues/", "/console/queues/?partial=1", "/console/queues/new/", "/console/queues/root/",
               "/console/queues/vision-lab/delete/", "/console/queues/vision-lab/history/"]


def field_errors(html: str, field: str) -> list[str]:
    found = re.search(rf'<ul class="errors field-errors" data-field="{field}">(.*?)</ul>', html, re.S)
    return re.findall(r"<li>(.*?)</li>", found.group(1), re.S) if found else []


def form_row(html: str, field: str) -> str:
    """The form row of one field: its label, input, errors and help."""
    found = re.search(rf'<div class="form-row[^"]*" data-row="{field}">(.*?)\n  </div>', html, re.S)
    assert found, f"no form row for {field}"
    return found.group(1)


def queue_data(queue, **changes):
    data = {"name": queue.name, "parent": queue.parent.name if queue.parent else "",
            "deserved_gpus": queue.deserved_gpus, "over_quota_weight": queue.over_quota_weight,
            "limit_gpus": "" if queue.limit_gpus is None else queue.limit_gpus, "priority": queue.priority}
    return {**data, **changes}


# --------------------------------------------------------------------------- operators only


@pytest.mark.django_db
@pytest.mark.parametrize("url", QUEUE_PAGES)
def test_queue_pages_are_for_operators_only(client, cluster, url):
    assert client.get(url).status_code == 302  # anonymous: to the login page
    for tenant in (cluster.alice, cluster.bob):  # both workspaces' owners
        client.force_login(tenant)
        assert client.get(url).status_code == 403
    client.force_login(cluster.admin)
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_tenants_cannot_change_or_delete_a_queue(client, cluster):
    empty = QueueFactory(name="spare", parent=Queue.objects.get(name="root"), deserved_gpus=0)
    for tenant in (cluster.alice, cluster.bob):
        client.force_login(tenant)
        assert client.post("/console/queues/spare/delete/").status_code == 403
        assert client.post("/console/queues/spare/", queue_data(empty, deserved_gpus="2")).status_code == 403
        assert client.post("/console/queues/new/", {"name": "mine", "deserved_gpus": "0",
                                                    "over_quota_weight": "1"}).status_code == 403
    empty.refresh_from_db()
    assert empty.deserved_gpus == 0 and not Queue.objects.filter(name="mine").exists()
    assert not AuditEntry.objects.exists()


# --------------------------------------------------------------------------- the tree


@pytest.mark.django_db
def test_tree_shows_rules_share_allocation_and_pending_reasons(admin_client, cluster, submit, backend, clock, run):
    # h100 has 16 GPUs: two 8-GPU jobs run, the third waits for GPUs
    jobs = []
    for i in range(3):
        jobs.append(submit(cluster, f"big-{i}", gpus=8))
        clock.advance(1)  # the third is the last in the queue's order (at one instant the ids would decide it)
    run(backend, clock)
    waiting = Job.objects.get(pk=jobs[2].pk)
    assert waiting.state == JobState.PENDING and waiting.pending_code
    html = admin_client.get("/console/queues/").content.decode()

    def cell(queue, field):
        row = re.search(rf'<tr data-queue="{queue}" data-depth="(\d)">(.*?)</tr>', html, re.S)
        assert row, queue
        found = re.search(rf'data-field="{field}"[^>]*>(.*?)</(?:td|span|div)>', row.group(2), re.S)
        return row.group(1), found.group(1).strip() if found else None

    assert cell("root", "deserved") == ("0", "80.00")
    assert cell("root", "sub-deserved")[1] == "sub-queues 32.00"          # 16 + 16 + 0 of its 80
    assert cell("vision-lab", "deserved") == ("1", "16.00")
    assert cell("vision-lab", "allocated")[1] == "16.00" and cell("root", "allocated")[1] == "16.00"
    assert cell("vision-lab", "fair-share")[1] not in (None, "")
    assert cell("vision-lab", "pending-jobs")[1] == "1" and cell("root", "pending-jobs")[1] == "1"  # root: its subtree
    assert cell("nlp-group", "pending-jobs")[1] == "0"
    reasons = re.search(r'<tr data-queue="vision-lab".*?data-field="pending-reasons">(.*?)</td>', html, re.S).group(1)
    assert "1 ×" in reasons and waiting.pending_reason.split(";")[0][:30] in reasons
    assert cell("vision-lab", "workspaces")[1] == "submitted to by vision-lab"
    # the live refresh returns the same rows
    partial = admin_client.get("/console/queues/?partial=1").content.decode()
    assert '<tr data-queue="vision-lab" data-depth="1">' in partial and "<html" not in partial


@pytest.mark.django_db
def test_pending_reasons_are_counted_per_code_over_the_subtree(cluster):
    from portal.console.selectors import pending_by_queue
    from portal.history_catalogue import NOT_LOOKED_AT

    vision, nlp = Queue.objects.get(name="vision-lab"), Queue.objects.get(name="nlp-group")
    for _ in range(3):
        JobFactory(workspace=cluster.vision, queue=vision, pending_code="whole_gpus_busy",
                   pending_reason="the node has 0 wholly free GPUs, the replica asks 8")
    JobFactory(workspace=cluster.vision, queue=vision, pending_code="queue_over_limit", pending_reason="over limit")
    JobFactory(workspace=cluster.nlp, queue=nlp)  # no cycle has looked at it yet
    JobFactory(workspace=cluster.nlp, queue=nlp, state=JobState.RUNNING, pending_code="whole_gpus_busy")
    pending = pending_by_queue(top=2)
    assert pending["vision-lab"].jobs == 4
    assert [(r.code, r.jobs) for r in pending["vision-lab"].reasons] == [("whole_gpus_busy", 3),
                                                                         ("queue_over_limit", 1)]
    assert [(r.code, r.jobs, r.example) for r in pending["nlp-group"].reasons] == [("", 1, NOT_LOOKED_AT)]
    assert pending["root"].jobs == 5 and pending["root"].reasons[0] == pending["vision-lab"].reasons[0]
    assert "community" not in pending


# --------------------------------------------------------------------------- the form


@pytest.mark.django_db
def test_form_has_labels_and_help_beside_each_field(admin_client, cluster):
    html = admin_client.get("/console/queues/vision-lab/").content.decode()
    deserved = form_row(html, "deserved_gpus")
    assert '<label for="f-deserved">Deserved quota (GPUs):</label>' in deserved
    assert 'id="f-deserved"' in deserved and 'value="16.00"' in deserved
    assert "deserve at most the parent" in deserved and 'aria-describedby="id_deserved_gpus_helptext"' in deserved
    assert "Empty: no limit" in form_row(html, "limit_gpus")
    assert "the tree would loop" in form_row(html, "parent")
    assert '<option value="root" selected>root</option>' in form_row(html, "parent")
    assert '<option value="vision-lab"' not in form_row(html, "parent")  # not its own parent
    assert "deserved_gpus:" not in html  # no internal field names in the messages
    new = admin_client.get("/console/queues/new/?parent=community").content.decode()
    assert '<option value="community" selected>community</option>' in form_row(new, "parent")


@pytest.mark.django_db
def test_a_loop_is_refused_with_the_error_beside_the_parent(admin_client, cluster):
    root = Queue.objects.get(name="root")
    QueueFactory(name="research", parent=root, deserved_gpus=8)
    QueueFactory(name="vision-team", parent=Queue.objects.get(name="research"), deserved_gpus=8)
    # research under its own sub-queue
    response = admin_client.post("/console/queues/research/", queue_data(
        Queue.objects.get(name="research"), parent="vision-team"))
    assert response.status_code == 400
    html = response.content.decode()
    assert any("the tree would loop" in m for m in field_errors(html, "parent"))
    assert 'aria-invalid="true"' in form_row(html, "parent")
    assert '<option value="vision-team" selected>' in form_row(html, "parent")  # the refused choice stays
    assert not field_errors(html, "deserved_gpus")
    assert Queue.objects.get(name="research").parent == root
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_every_error_of_every_field_at_once(admin_client, cluster):
    vision = Queue.objects.get(name="vision-lab")
    response = admin_client.post("/console/queues/vision-lab/", queue_data(
        vision, deserved_gpus="70", over_quota_weight="-1", limit_gpus="20", priority="5000"))
    assert response.status_code == 400
    html = response.content.decode()
    assert any("more than its 80" in m for m in field_errors(html, "deserved_gpus"))
    assert any("0 or more" in m for m in field_errors(html, "over_quota_weight"))
    assert any("below the deserved quota" in m for m in field_errors(html, "limit_gpus"))
    assert any("less than or equal to 1000" in m for m in field_errors(html, "priority"))
    # each message sits in its own field's row, after the input
    row = form_row(html, "limit_gpus")
    assert row.index('id="f-limit"') < row.index("below the deserved quota")
    vision.refresh_from_db()
    assert (vision.deserved_gpus, vision.over_quota_weight, vision.limit_gpus, vision.priority) == (16, 1, None, 0)


@pytest.mark.django_db
def test_numbers_are_bounded(admin_client, cluster):
    response = admin_client.post("/console/queues/new/", {"name": "huge", "deserved_gpus": "123456789012",
                                                          "over_quota_weight": "NaN", "priority": "-1001"})
    assert response.status_code == 400
    html = response.content.decode()
    assert any("no more than 10 digits" in m for m in field_errors(html, "deserved_gpus"))
    assert field_errors(html, "over_quota_weight") == ["Enter a number."]
    assert any("greater than or equal to -1000" in m for m in field_errors(html, "priority"))
    assert not Queue.objects.filter(name="huge").exists()


@pytest.mark.django_db
def test_a_child_deserving_more_than_its_parent_is_refused(admin_client, cluster):
    response = admin_client.post("/console/queues/new/", {"name": "big", "parent": "root", "deserved_gpus": "49",
                                                          "over_quota_weight": "1"})
    assert response.status_code == 400
    assert any("would deserve 81 GPUs in all, more than its 80" in m
               for m in field_errors(response.content.decode(), "deserved_gpus"))
    assert not Queue.objects.filter(name="big").exists()


@pytest.mark.django_db
def test_a_saved_queue_is_confirmed_and_audited(admin_client, cluster):
    response = admin_client.post("/console/queues/new/", {"name": "research", "parent": "root",
                                                          "deserved_gpus": "48", "over_quota_weight": "2",
                                                          "limit_gpus": "60", "priority": "10"})
    assert response.status_code == 302 and response["Location"] == "/console/queues/"
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Queue research created."]
    research = Queue.objects.get(name="research")
    assert (research.parent.name, research.deserved_gpus, research.limit_gpus, research.priority) == ("root", 48, 60, 10)
    response = admin_client.post("/console/queues/research/", queue_data(research, deserved_gpus="40"), follow=True)
    assert "Queue research saved." in response.content.decode()
    entry = AuditEntry.objects.filter(target_repr="research").first()
    assert (entry.action, entry.changes) == ("change", {"deserved_gpus": ["48", "40"]})


# --------------------------------------------------------------------------- delete, with confirmation


@pytest.mark.django_db
def test_delete_asks_for_confirmation_then_deletes(admin_client, cluster):
    QueueFactory(name="spare", parent=Queue.objects.get(name="root"), deserved_gpus=2)
    page = admin_client.get("/console/queues/spare/delete/").content.decode()
    assert 'id="confirm-delete"' in page and "cannot be undone" in page
    assert Queue.objects.filter(name="spare").exists()  # asking changes nothing
    response = admin_client.post("/console/queues/spare/delete/")
    assert response.status_code == 302
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Queue spare deleted."]
    assert not Queue.objects.filter(name="spare").exists()
    assert AuditEntry.objects.get(action="delete").target_repr == "spare"


@pytest.mark.django_db
def test_delete_names_the_workspaces_that_lose_the_queue(admin_client, cluster):
    page = admin_client.get("/console/queues/community/delete/").content.decode()
    assert re.search(r'id="delete-workspaces">[^<]*nlp-group, vision-lab', page)
    assert "default queue" not in page
    assert "default queue of vision-lab" in admin_client.get("/console/queues/vision-lab/delete/").content.decode()


@pytest.mark.django_db
def test_delete_is_refused_for_a_queue_with_jobs(admin_client, cluster):
    vision = Queue.objects.get(name="vision-lab")
    JobFactory(workspace=cluster.vision, queue=vision, state=JobState.SUCCEEDED)
    page = admin_client.get("/console/queues/vision-lab/delete/").content.decode()
    assert 'id="confirm-delete"' not in page
    assert "it holds 1 job (0 not finished)" in page
    response = admin_client.post("/console/queues/vision-lab/delete/")
    assert response.status_code == 400
    html = response.content.decode()
    assert "queue &#x27;vision-lab&#x27; cannot be deleted: it holds 1 job" in html and 'id="confirm-delete"' not in html
    assert Queue.objects.filter(name="vision-lab").exists() and not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_delete_is_refused_for_a_queue_with_sub_queues(admin_client, cluster):
    response = admin_client.post("/console/queues/root/delete/")
    assert response.status_code == 400
    assert "it has sub-queues (community, nlp-group, vision-lab)" in response.content.decode()
    assert Queue.objects.filter(name="root").exists()
