"""Queue-tree validation (pure and through the console), and the fair share the console shows."""

from decimal import Decimal

import pytest

from scheduling.queue_tree import QueueRow, validate_queue


def rows(*specs):
    return [QueueRow(name, parent, Decimal(d), Decimal(1), None if lim is None else Decimal(lim), jobs)
            for name, parent, d, lim, jobs in specs]


def test_children_must_fit_the_parent():
    tree = rows(("root", None, "10", None, False), ("a", "root", "6", None, False), ("b", "root", "5", None, False))
    errors = validate_queue(tree, "b")
    assert list(errors) == ["deserved_gpus"]
    assert "root" in errors["deserved_gpus"][0] and "11" in errors["deserved_gpus"][0]
    # the same tree seen from the parent: its sub-queues deserve more than it has
    assert "a, b" in validate_queue(tree, "root")["deserved_gpus"][0]


def test_a_tree_that_fits_has_no_errors():
    tree = rows(("root", None, "11", None, False), ("a", "root", "6", "8", False), ("b", "root", "5", None, True))
    assert validate_queue(tree, "a") == {} and validate_queue(tree, "root") == {}


def test_limit_below_deserved_names_the_limit():
    errors = validate_queue(rows(("a", None, "4", "2", False)), "a")
    assert list(errors) == ["limit_gpus"] and "below the deserved quota" in errors["limit_gpus"][0]


def test_negative_amounts_are_refused():
    tree = [QueueRow("a", None, Decimal(-1), Decimal(-2), Decimal(-3))]
    assert set(validate_queue(tree, "a")) == {"deserved_gpus", "over_quota_weight", "limit_gpus"}


def test_loops_and_missing_parents_name_the_parent():
    loop = rows(("a", "b", "0", None, False), ("b", "a", "0", None, False))
    assert "loop" in validate_queue(loop, "a")["parent"][0]
    assert "does not exist" in validate_queue(rows(("a", "nope", "0", None, False)), "a")["parent"][0]


def test_a_queue_with_jobs_cannot_become_a_parent():
    tree = rows(("busy", None, "4", None, True), ("kid", "busy", "1", None, False))
    assert "holds jobs" in validate_queue(tree, "kid")["parent"][0]


# --------------------------------------------------------------------------- through the console


@pytest.mark.django_db
def test_console_refuses_an_overcommitted_child_and_changes_nothing(admin_client, cluster):
    from portal.console.models import AuditEntry
    from scheduling.models import Queue

    response = admin_client.post("/console/queues/vision-lab/", {
        "name": "vision-lab", "parent": "root", "deserved_gpus": "70", "over_quota_weight": "1", "priority": "0"})
    assert response.status_code == 400
    text = response.content.decode()
    assert 'data-field="deserved_gpus"' in text and "more than its 80" in text
    assert Queue.objects.get(name="vision-lab").deserved_gpus == 16
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_console_limit_error_names_the_field(admin_client, cluster):
    response = admin_client.post("/console/queues/new/", {
        "name": "tiny", "parent": "root", "deserved_gpus": "4", "over_quota_weight": "1", "limit_gpus": "2"})
    assert response.status_code == 400
    assert 'data-field="limit_gpus"' in response.content.decode()


@pytest.mark.django_db
def test_quota_change_moves_the_fair_share(cluster, operator, submit):
    """Both teams ask for 64 GPUs of an 80-GPU cluster: the fair share follows the deserved quota."""
    from portal.console import selectors, services
    from scheduling.models import Queue

    submit(cluster, "big-v", gpus=8, min=1, max=8)
    submit(cluster, "big-n", workspace="nlp", queue="nlp-group", gpus=8, min=1, max=8)
    share = {q.name: q for q in selectors.queue_lines()}
    assert share["vision-lab"].fair_share == pytest.approx(40) and share["nlp-group"].fair_share == pytest.approx(40)
    assert share["vision-lab"].pending_demand == pytest.approx(8) and share["vision-lab"].demand == pytest.approx(64)
    assert share["vision-lab"].lent == pytest.approx(16) and share["root"].depth == 0
    services.save_queue(operator, Queue.objects.get(name="vision-lab"), {
        "name": "vision-lab", "parent": "root", "deserved_gpus": "30", "over_quota_weight": "1", "priority": "0"})
    share = {q.name: q for q in selectors.queue_lines()}
    # 30 + half of (80 - 30 - 16) = 47; nlp-group 16 + 17 = 33
    assert share["vision-lab"].fair_share == pytest.approx(47) and share["nlp-group"].fair_share == pytest.approx(33)


@pytest.mark.django_db
def test_a_queue_workspaces_submit_to_stays_a_leaf(admin_client, cluster):
    from scheduling.models import Queue

    response = admin_client.post("/console/queues/new/", {
        "name": "vision-sub", "parent": "vision-lab", "deserved_gpus": "1", "over_quota_weight": "1"})
    assert response.status_code == 400 and "workspaces submit to it" in response.content.decode()
    assert not Queue.objects.filter(name="vision-sub").exists()
    ok = admin_client.post("/console/queues/new/", {
        "name": "research", "parent": "root", "deserved_gpus": "8", "over_quota_weight": "2", "limit_gpus": "12"})
    assert ok.status_code == 302 and Queue.objects.get(name="research").parent.name == "root"
