"""A notebook's kernel activity as its server tells it: the simulated server's own figures, or a real
Jupyter Server's `api/status` and `api/kernels` (its last activity against its own Date header, so the
two machines' clocks need not agree); a server that does not answer tells nothing."""

from __future__ import annotations

import httpx

from scheduling.backends.base import Endpoint
from scheduling.notebooks import Activity, read_activity

ENDPOINT = Endpoint(url="http://nb.example:8888/nb/vision-lab/lab/", token="t0k")


def jupyter(request: httpx.Request) -> httpx.Response:
    assert request.headers["Authorization"] == "token t0k"
    path = request.url.path.removeprefix("/nb/vision-lab/lab/")
    date = {"Date": "Tue, 24 Nov 2026 12:10:00 GMT"}
    if path == "metrics":  # Jupyter's metrics are Prometheus text: no figures of ours
        return httpx.Response(200, text="# HELP http_requests_total\n", headers={"Content-Type": "text/plain"})
    if path == "api/status":
        return httpx.Response(200, json={"started": "2026-11-24T11:00:00.000000Z", "connections": 1,
                                         "last_activity": "2026-11-24T12:02:30.000000Z", "kernels": 2}, headers=date)
    if path == "api/kernels":
        return httpx.Response(200, json=[{"id": "a", "execution_state": "idle"},
                                         {"id": "b", "execution_state": "busy"}], headers=date)
    return httpx.Response(404)


def test_a_real_jupyter_server_is_read_through_its_own_api():
    activity = read_activity(ENDPOINT, transport=httpx.MockTransport(jupyter))
    assert activity == Activity(kernel_idle_s=450.0, busy_kernels=1, gpu_measured=False)


def test_the_simulated_server_gives_its_own_figures():
    def simulated(request: httpx.Request) -> httpx.Response:
        assert request.url.params["format"] == "json"
        return httpx.Response(200, json={"last_kernel_activity_age_s": 12.5, "busy_kernels": 0,
                                         "gpu": {"utilisation": 0.0}})

    activity = read_activity(ENDPOINT, transport=httpx.MockTransport(simulated))
    assert activity == Activity(kernel_idle_s=12.5, busy_kernels=0, gpu_measured=True, gpu_busy=False)


def test_a_server_that_does_not_answer_tells_nothing():
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    assert read_activity(ENDPOINT, transport=httpx.MockTransport(down)) is None
    refusing = httpx.MockTransport(lambda request: httpx.Response(403, json={"message": "token"}))
    assert read_activity(ENDPOINT, transport=refusing) is None
