"""A job's life as the portal gives it: the queue's runtime limits in the console, the refusal at submit, the
quote's upper bound, and the API's job detail and the job page (end code and reason, attempts, deadline), each
for the job's own workspace only."""

import pytest

from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, Queue

SPEC = """name: {name}
queue: vision-lab
expectedDuration: 1h
{extra}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 1}}
    nodePool: h100
    env: {{{env}}}
"""


def spec(name, extra="", env=""):
    return SPEC.format(name=name, extra=extra, env=env)



@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock, training_processes=False)


def submit(api, text):
    return api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": text}, format="json")


def test_a_job_asking_more_than_its_queue_allows_is_refused_with_both_figures(cluster, api_as):
    Queue.objects.filter(name="vision-lab").update(default_max_runtime_s=3600, max_runtime_s=6 * 3600)
    alice = api_as(cluster.alice)
    refused = submit(alice, spec("greedy", "maxRuntime: 8h"))
    assert refused.status_code == 400, refused.json()
    assert "maxRuntime 8h is more than queue 'vision-lab' allows (6h)" in str(refused.json())
    assert not Job.objects.exists()
    asked = submit(alice, spec("modest", "maxRuntime: 2h"))
    default = submit(alice, spec("plain"))
    assert asked.status_code == default.status_code == 201
    assert Job.objects.get(name="modest").max_runtime_s == 7200
    assert Job.objects.get(name="plain").max_runtime_s == 3600  # the queue's default


def test_the_quote_uses_max_runtime_as_the_upper_bound(cluster, api_as, clock):
    """Priced at noon on the platform clock: a 3-hour window then has one price (at some hours of the day
    it would cross into or out of off-peak, and 3 hours would not cost 3 times 1)."""
    alice = api_as(cluster.alice)

    def options(extra):
        body = alice.post(
            "/api/v1/quotes/", {"workspace": "vision-lab", "spec": spec("q", extra)}, format="json"
        )
        assert body.status_code == 200, body.json()
        return {o["id"]: o for o in body.json()["options"]}

    plain, capped = options(""), options("maxRuntime: 3h")
    some = next(iter(plain))
    assert plain[some]["estimate_low"] == plain[some]["estimate_high"]
    assert float(capped[some]["estimate_high"]) == pytest.approx(
        3 * float(plain[some]["estimate_high"]), rel=0.01
    )
    assert capped[some]["estimate_low"] == plain[some]["estimate_low"]


def test_the_job_detail_gives_the_end_code_its_reason_and_the_attempts(
    cluster, api_as, backend, clock, run, client
):
    alice = api_as(cluster.alice)
    created = submit(
        alice,
        spec(
            "flaky",
            "retry: {limit: 2, backoff: 30s}\nmaxRuntime: 2h",
            'SIM_EXIT_CODE: "3,0", SIM_FAIL_AFTER: 5m',
        ),
    )
    job_id = created.json()["id"]
    for seconds in (1, 2):
        clock.advance(seconds)
        run(backend, clock)
    running = alice.get(f"/api/v1/jobs/{job_id}/").json()
    assert (
        running["end_code"] is None and running["end_reason_text"] == "" and running["max_runtime_s"] == 7200
    )
    assert running["deadline"] is not None
    assert [(a["number"], a["class"], a["end"]) for a in running["attempts"]] == [(1, None, None)]
    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{job_id}/").content.decode()
    assert 'id="job-deadline"' in page and "Maximum runtime 2h per run." in page
    for seconds in (5, 31, 2, 62):
        clock.advance(seconds)
        run(backend, clock)
    done = alice.get(f"/api/v1/jobs/{job_id}/").json()
    assert (done["state"], done["end_code"], done["end_reason_text"]) == (
        "Succeeded",
        "succeeded",
        "every replica finished",
    )
    assert [(a["number"], a["class"], a["exit_code"], a["counted"]) for a in done["attempts"]] == [
        (1, "exit_code", 3, True),
        (2, "succeeded", None, False),
    ]
    assert set(done["attempts"][0]) >= {"number", "start", "end", "class", "exit_code", "node"}
    assert done["attempts"][0]["node"].startswith("h100")
    page = client.get(f"/jobs/{job_id}/").content.decode()
    assert 'id="attempts-table"' in page and 'data-attempt="2"' in page and "<code>exit_code</code>" in page
    assert 'id="job-end-code">succeeded<' in page and 'id="job-deadline"' not in page
    partial = client.get(f"/jobs/{job_id}/?partial=life").content.decode()   # what the page reads again live
    assert partial.startswith('<section class="card" id="job-life">') and 'data-attempt="2"' in partial
    events = alice.get(f"/api/v1/jobs/{job_id}/events/").json()
    retrying = next(e for e in events if e["kind"] == "retrying")
    assert (
        retrying["reason"] == "replica main-0 exited with code 3: simulated failure: CUDA error: an illegal "
        "memory access; retry 1 of 2 in 30s"
    )
    assert retrying["data"]["class"] == "exit_code"

    bob = api_as(cluster.bob)
    assert bob.get(f"/api/v1/jobs/{job_id}/").status_code == 404
    client.force_login(cluster.bob)
    assert client.get(f"/jobs/{job_id}/").status_code == 404
