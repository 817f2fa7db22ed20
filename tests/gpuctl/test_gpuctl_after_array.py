"""gpuctl and the jobs' dependencies and arrays: `describe` shows them, `cancel --index N` cancels one index."""

from __future__ import annotations

import json

import httpx

from gpuctl.output import format_job
from tests.gpuctl.test_gpuctl_verbs_unit import JOB, FakeServer, cli  # noqa: F401 (the fixture)

ARRAY = {
    **JOB,
    "id": 20,
    "name": "sweep",
    "state": "Running",
    "currency": "USD",
    "after": [{"job": 7, "name": "prep", "condition": "succeeded"}],
    "array": {
        "indices": "0-19",
        "parallelism": 5,
        "counts": {"Running": 5, "Succeeded": 3, "Pending": 12},
        "total_cost": "1.25",
    },
}


def test_describe_shows_what_a_job_waits_for_and_an_arrays_counts():
    out = format_job(ARRAY, [])
    assert "after           prep #7 (succeeded)\n" in out
    assert "array           0-19, parallelism 5\n" in out
    assert "indices         5 Running, 3 Succeeded, 12 Pending\n" in out
    assert "array cost      1.25 USD" in out
    child = format_job({**JOB, "array_parent": 20, "array_index": 3, "after": [], "array": None}, [])
    assert "array           #20 index 3\n" in child


def test_cancel_one_index_of_an_array(cli):  # noqa: F811
    server = FakeServer({("POST", "/api/v1/jobs/20/cancel/"): httpx.Response(200, json=ARRAY)})
    code, out, err = cli(server, "cancel", "20", "--index", "3")
    assert (code, err) == (0, "") and out == "job 20 (sweep): Running\n"
    [asked] = server.asked("/api/v1/jobs/20/cancel/")
    assert json.loads(asked.content) == {"index": 3}
    cli(server, "cancel", "20")
    assert server.requests[-1].content in (b"", b"null")  # the whole job: no index sent
