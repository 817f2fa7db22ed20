"""Dependencies (`after`, the Blocked state) and array jobs: spec, service and cycle levels."""

import pytest

from billing.services import quote_for_workspace, submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.core.arrays import IndicesError, next_indices, normalise_indices, parse_indices
from scheduling.lifecycle.arrays import array_detail
from scheduling.models import Job, JobState, Replica
from scheduling.services import cancel_array_index, cancel_job
from scheduling.spec import SpecError, parse_job_spec, parse_job_spec_obj, spec_to_dict

ONE_GPU = """name: {name}
queue: vision-lab
preemptible: true
expectedDuration: 1h
{extra}roles:
  - name: main
    image: busybox
    resources: {{gpu: 1}}
    nodePool: h100
"""


def spec(name, extra=""):
    return ONE_GPU.format(name=name, extra=extra)


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)  # a 1 h job runs 60 s


# --------------------------------------------------------------------------- spec


def test_after_and_array_are_read_and_written_back():
    parsed = parse_job_spec(
        spec(
            "t",
            "after:\n  - {job: prep}\n  - {job: 12, condition: finished}\n"
            'array: {indices: "0-9,20,30-39", parallelism: 5}\n',
        )
    )
    assert [(a.job, a.condition) for a in parsed.after] == [("prep", "succeeded"), ("12", "finished")]
    assert (parsed.array.indices, parsed.array.parallelism, parsed.array.count) == ("0-9,20,30-39", 5, 21)
    assert parse_job_spec_obj(spec_to_dict(parsed)) == parsed


@pytest.mark.parametrize(
    "extra, where, says",
    [
        ("after: [{job: prep, condition: done}]\n", (5, 32), "not one of succeeded | failed | finished"),
        ("after: prep\n", (5, 8), "must be a list"),
        ("after: [{job: Bad_Name}]\n", (5, 15), "is not a job name or id"),
        ("after: [prep, prep]\n", (5, 15), "twice"),
        ('array: {indices: "9-1"}\n', (5, 18), "goes backwards"),
        ('array: {indices: "1,1"}\n', (5, 18), "given twice"),
        ('array: {indices: "a-b"}\n', (5, 18), "is not valid"),
        ('array: {indices: "0-9", parallelism: 0}\n', (5, 38), "must be from 1"),
        ('array: {indices: "0-9", size: 3}\n', (5, 25), "unknown field 'size'"),
    ],
)
def test_bad_after_or_array_is_refused_at_its_line_and_column(extra, where, says):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(spec("t", extra))
    issue = caught.value.errors[0]
    assert (issue.line, issue.column) == where and says in issue.message


def test_indices_parse_and_window():
    assert parse_indices("0-2,5, 7-8") == (0, 1, 2, 5, 7, 8)
    assert normalise_indices((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"
    with pytest.raises(IndicesError):
        parse_indices("0-20000")
    assert next_indices(tuple(range(20)), 0, 5, 0) == (0, 1, 2, 3, 4)
    assert next_indices(tuple(range(20)), 5, 5, 3) == (5, 6)
    assert next_indices(tuple(range(20)), 20, 5, 0) == ()


# --------------------------------------------------------------------------- service


def test_a_job_after_another_is_blocked_naming_what_it_waits_for(cluster, clock):
    prep = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("prep"))
    train = submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("train", "after: [{job: prep, condition: succeeded}]\n"),
    )
    assert train.state == JobState.BLOCKED
    assert train.after == [{"job": prep.pk, "name": "prep", "condition": "succeeded"}]
    assert train.pending_code == "waits_for_jobs" and f"prep (#{prep.pk}) to succeed" in train.pending_reason


def test_by_name_is_the_latest_of_that_name_and_by_id_any(cluster, clock):
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("prep"))
    clock.advance(1)
    latest = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("prep"))
    job = submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("t", f"after: [prep, {{job: {latest.pk}, condition: finished}}]\n"),
    )
    assert [e["job"] for e in job.after] == [latest.pk, latest.pk]


def test_unknown_job_and_a_job_waiting_for_itself_are_refused_at_their_lines(cluster, clock):
    with pytest.raises(SpecError) as caught:
        submit_quoted_job(
            user=cluster.alice,
            workspace=cluster.vision,
            spec=spec("loop", "after:\n  - {job: nothing-here}\n  - {job: loop}\n"),
        )
    first, second = caught.value.errors
    assert (first.line, first.column) == (6, 11) and "no job nothing-here" in first.message
    assert (second.line, second.column) == (7, 11) and "cycle" in second.message
    assert not Job.objects.filter(name="loop").exists()


def test_a_job_cannot_wait_for_another_workspaces_job_by_id_or_name(cluster, clock):
    theirs = submit_quoted_job(
        user=cluster.bob,
        workspace=cluster.nlp,
        spec=spec("secret-prep").replace("queue: vision-lab", "queue: nlp-group"),
    )
    for ref in (str(theirs.pk), "secret-prep"):
        with pytest.raises(SpecError) as caught:
            submit_quoted_job(
                user=cluster.alice, workspace=cluster.vision, spec=spec("t", f"after: [{ref}]\n")
            )
        assert f"no job {ref}" in str(caught.value)
    assert not Job.objects.filter(workspace=cluster.vision).exists()


def test_the_quote_of_an_array_multiplies(cluster, clock):
    _, one = quote_for_workspace(cluster.vision, spec("one"))
    _, many = quote_for_workspace(cluster.vision, spec("many", 'array: {indices: "0-9", parallelism: 2}\n'))
    assert many.cheapest.amount_low == one.cheapest.amount_low * 10  # rounded once, on the total
    assert any("10 indices" in t for t in many.cheapest.tradeoffs)


def test_an_array_parent_places_nothing_and_its_children_take_one_share_of_the_quote(cluster, clock):
    parent = submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("sweep", 'array: {indices: "0-3", parallelism: 2}\n'),
    )
    assert parent.roles == [] and parent.array_size == 4 and parent.state == JobState.PENDING
    assert parent.array["roles"][0]["name"] == "main"
    assert float(parent.array["quote"]["estimate_low"]) == pytest.approx(
        float(parent.quote["estimate_low"]) / 4, abs=0.01
    )
    assert array_detail(parent) == {"indices": "0-3", "parallelism": 2, "counts": {"Pending": 4}}


# --------------------------------------------------------------------------- cycle


def _finish_all(backend, clock, run, cycles):
    for _ in range(cycles):
        clock.advance(20)
        run(backend, clock)


def test_a_chain_of_three_runs_in_order(cluster, backend, clock, run):
    a = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("a"))
    b = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("b", "after: [a]\n"))
    c = submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("c", "after: [{job: b, condition: finished}]\n"),
    )
    _finish_all(backend, clock, run, 20)
    for job in (a, b, c):
        job.refresh_from_db()
        assert job.state == JobState.SUCCEEDED
    assert a.finished <= b.started and b.finished <= c.started
    assert "released" in [e.kind for e in b.events.all()]


def test_a_dependency_that_cannot_be_met_cancels_the_job_and_its_followers(cluster, backend, clock, run):
    a = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("a"))
    b = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("b", "after: [a]\n"))
    c = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("c", "after: [b]\n"))
    on_failure = submit_quoted_job(
        user=cluster.alice, workspace=cluster.vision, spec=spec("d", "after: [{job: a, condition: failed}]\n")
    )
    cancel_job(user=cluster.alice, job=a)
    run(backend, clock)
    run(backend, clock)
    for job in (b, c, on_failure):
        job.refresh_from_db()
        assert job.state == JobState.CANCELLED
    last = b.events.order_by("-id").first()
    assert "can no longer happen" in last.reason and not Replica.objects.filter(job__in=(b, c)).exists()


def test_blocked_jobs_are_not_placed_and_do_not_take_the_room(cluster, backend, clock, run):
    long = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("long"))
    waiting = submit_quoted_job(
        user=cluster.alice, workspace=cluster.vision, spec=spec("w", "after: [long]\n")
    )
    run(backend, clock)
    waiting.refresh_from_db()
    long.refresh_from_db()
    assert long.state == JobState.SCHEDULED and waiting.state == JobState.BLOCKED
    assert not waiting.replicas.exists()


def test_an_array_of_20_at_parallelism_5_never_runs_more_than_5(cluster, backend, clock, run):
    parent = submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("sweep", 'array: {indices: "0-19", parallelism: 5}\n'),
    )
    most = 0
    for _ in range(60):
        run(backend, clock)
        children = Job.objects.filter(array_parent=parent)
        unfinished = children.exclude(state__in=(JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED))
        active = Replica.objects.filter(
            job__array_parent=parent, state__in=(JobState.SCHEDULED, JobState.RUNNING)
        )
        assert unfinished.count() <= 5 and active.count() <= 5
        most = max(most, active.count())
        clock.advance(15)
        parent.refresh_from_db()
        if parent.is_final:
            break
    assert parent.state == JobState.SUCCEEDED and most == 5
    children = Job.objects.filter(array_parent=parent)
    assert sorted(children.values_list("array_index", flat=True)) == list(range(20))
    assert set(children.values_list("state", flat=True)) == {JobState.SUCCEEDED}
    envs = {c.array_index: c.roles[0]["env"]["ARRAY_INDEX"] for c in children}
    assert all(envs[i] == str(i) for i in range(20))
    assert array_detail(parent) == {"indices": "0-19", "parallelism": 5, "counts": {"Succeeded": 20}}
    assert all(c.final_cost is not None for c in children)
    # the parent's final cost is its indices' (it holds nothing itself), within the multiplied estimate's reach
    assert parent.final_cost == sum(c.final_cost for c in children) > 0


def test_cancelling_an_index_or_the_whole_array(cluster, backend, clock, run):
    parent = submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("sweep", 'array: {indices: "0-9", parallelism: 2}\n'),
    )
    run(backend, clock)
    cancel_array_index(user=cluster.alice, job=parent, index=0)  # made: the child is cancelled
    cancel_array_index(user=cluster.alice, job=parent, index=7)  # not made yet: made cancelled later
    run(backend, clock)
    assert Job.objects.get(array_parent=parent, array_index=0).state == JobState.CANCELLED
    cancel_job(user=cluster.alice, job=parent)
    parent.refresh_from_db()
    assert parent.state == JobState.CANCELLED
    assert not Job.objects.filter(array_parent=parent).exclude(state=JobState.CANCELLED).exists()
    run(backend, clock)
    assert Job.objects.filter(array_parent=parent).count() <= 3  # no more children once cancelled


def test_another_workspace_cannot_cancel_an_index(cluster, clock):
    from scheduling.services import NotSubmitter

    parent = submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("sweep", 'array: {indices: "0-9", parallelism: 2}\n'),
    )
    with pytest.raises(NotSubmitter):
        cancel_array_index(user=cluster.bob, job=parent, index=1)


def test_the_image_form_takes_after_and_array_and_shows_them_again():
    from scheduling.spec import image_form_values, spec_from_image_form

    parsed = spec_from_image_form(
        {"image": "busybox", "after": "prep:failed, 12", "arrayIndices": "0-9", "arrayParallelism": "3"}
    )
    assert [(a.job, a.condition) for a in parsed.after] == [("prep", "failed"), ("12", "succeeded")]
    assert (parsed.array.indices, parsed.array.parallelism) == ("0-9", 3)
    values, hidden = image_form_values(parsed)
    assert (values["after"], values["arrayIndices"], values["arrayParallelism"]) == (
        "prep:failed, 12:succeeded",
        "0-9",
        "3",
    ) and hidden == []
    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"image": "busybox", "arrayIndices": "x", "arrayParallelism": "two"})
    assert "arrayParallelism" in str(caught.value)


def test_the_cycles_step_takes_as_many_queries_for_many_arrays_and_blocked_jobs_as_for_few(cluster, clock):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduling.lifecycle.cycle import advance

    def queries(count):
        Job.objects.all().delete()
        prep = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("prep"))
        for n in range(count):
            submit_quoted_job(
                user=cluster.alice,
                workspace=cluster.vision,
                spec=spec(f"sweep{n}", 'array: {indices: "0-999", parallelism: 10}\n'),
            )
            submit_quoted_job(
                user=cluster.alice, workspace=cluster.vision, spec=spec(f"w{n}", "after: [prep]\n")
            )
        prep.state = JobState.SUCCEEDED
        prep.save()
        with CaptureQueriesContext(connection) as captured:
            advance(clock.now)
        assert Job.objects.filter(array_parent__isnull=False).count() == 10 * count
        assert not Job.objects.filter(state=JobState.BLOCKED).exists()
        sqls = [
            q["sql"] for q in captured.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))
        ]
        # reads one each, whatever the count; writes through the batched helpers (SQLite splits a batch by its
        # parameter limit, PostgreSQL does not)
        # (PostgreSQL's batched update names its row count in the statement: digits are not the statement's kind)
        return [q for q in sqls if q.startswith("SELECT")], {
            "".join(c for c in q.split(" ")[0] + q.split(" ")[2] if not c.isdigit()) for q in sqls}

    (few_reads, few_writes), (many_reads, many_writes) = queries(2), queries(8)
    assert len(few_reads) == len(many_reads) and few_writes == many_writes
