"""The simulated notebook as a real process: the page under its base URL, a token, kernels whose code keeps
the GPU busy, the last kernel activity, and a home directory that outlives the process."""

from __future__ import annotations

import time

import pytest

MODULE = "scheduling.backends.simulated.notebook_server"
BASE = "/nb/vision-lab/scratch"
TOKEN = {"Authorization": "token t0k"}


def start(start_process, home, *extra):
    return start_process(MODULE, "--base-url", BASE + "/", "--home", str(home), "--gpu", "0.5", "--token", "t0k",
                         "--title", "scratch", *extra)


def test_page_token_and_base_url(start_process, tmp_path):
    notebook = start(start_process, tmp_path)
    assert notebook.url.endswith(BASE)
    status, page = notebook.call("GET", "/lab", headers=TOKEN)
    assert status == 200 and "<h1>scratch</h1>" in page and "0.5 GPU" in page
    assert notebook.call("GET", "/lab")[0] == 403                        # no token
    assert notebook.call("GET", "/lab?token=t0k")[0] == 200              # Jupyter's query form
    assert notebook.call("GET", "/lab", headers={"Authorization": "token wrong"})[0] == 403
    outside = notebook.url[: -len(BASE)] + "/other/"
    notebook.url = outside.rstrip("/")
    assert notebook.call("GET", "/", headers=TOKEN)[0] == 404


def test_kernels_run_code_on_the_gpu_and_report_activity(start_process, tmp_path):
    notebook = start(start_process, tmp_path)
    _, figures = notebook.call("GET", "/metrics?format=json", headers=TOKEN)
    assert (figures["kernels"], figures["busy_kernels"], figures["gpu"]["busy_seconds_total"]) == (0, 0, 0)

    status, kernel = notebook.call("POST", "/api/kernels", {"name": "python3"}, headers=TOKEN)
    assert status == 201 and kernel["execution_state"] == "idle"
    assert notebook.call("GET", "/api/status", headers=TOKEN)[1]["kernels"] == 1

    status, running = notebook.call("POST", f"/api/kernels/{kernel['id']}/execute",
                                    {"code": "train()", "seconds": 0.4, "gpu": 0.5}, headers=TOKEN)
    assert status == 202 and running["execution_state"] == "busy" and running["execution_count"] == 1
    _, busy = notebook.call("GET", "/metrics?format=json", headers=TOKEN)
    assert busy["busy_kernels"] == 1 and busy["gpu"]["utilisation"] == 0.5

    time.sleep(0.6)
    _, done = notebook.call("GET", "/metrics?format=json", headers=TOKEN)
    assert done["busy_kernels"] == 0 and done["gpu"]["utilisation"] == 0
    assert done["gpu"]["busy_seconds_total"] == pytest.approx(0.4 * 0.5 * 0.5)      # seconds x use x slice
    assert done["last_kernel_activity_age_s"] >= 0.1                                   # the run ended 0.2 s ago
    time.sleep(0.3)
    _, later = notebook.call("GET", "/metrics?format=json", headers=TOKEN)
    assert later["last_kernel_activity_age_s"] >= done["last_kernel_activity_age_s"] + 0.3
    assert later["gpu"]["held_seconds_total"] >= 0.5 * 0.9                             # held, busy or not

    assert notebook.call("DELETE", f"/api/kernels/{kernel['id']}", headers=TOKEN)[0] == 204
    assert notebook.call("GET", "/api/kernels", headers=TOKEN) == (200, [])
    _, stopped = notebook.call("GET", "/metrics?format=json", headers=TOKEN)
    assert stopped["gpu"]["busy_seconds_total"] == pytest.approx(0.1)                  # the past run still counts
    status, text = notebook.call("GET", "/metrics", headers=TOKEN)
    assert status == 200 and "sim_notebook_last_kernel_activity_age_seconds" in text


@pytest.mark.parametrize(("method", "path", "body", "status"), [
    ("POST", "/api/kernels/nope/execute", {"seconds": 1}, 404),
    ("DELETE", "/api/kernels/nope", None, 404),
    ("PUT", "/api/contents/.hidden", {"content": "x"}, 400),
    ("PUT", "/api/contents/notes.txt", {"content": 3}, 400),
    ("GET", "/api/contents/missing.txt", None, 404),
    ("POST", "/api/kernels", {"name": "../bin/sh"}, 400),
    ("PATCH", "/api/kernels", None, 501),
])
def test_bad_requests(start_process, tmp_path, method, path, body, status):
    notebook = start(start_process, tmp_path)
    assert notebook.call(method, path, body, headers=TOKEN)[0] == status


def test_bad_execute_values(start_process, tmp_path):
    notebook = start(start_process, tmp_path)
    _, kernel = notebook.call("POST", "/api/kernels", {}, headers=TOKEN)
    for body in ({"seconds": 1, "gpu": 2}, {"seconds": -1}, {"seconds": "long"}):
        assert notebook.call("POST", f"/api/kernels/{kernel['id']}/execute", body, headers=TOKEN)[0] == 400
    assert notebook.call("GET", "/metrics?format=json", headers=TOKEN)[1]["busy_kernels"] == 0


def test_the_home_directory_outlives_the_process(start_process, tmp_path):
    home = tmp_path / "home"
    first = start(start_process, home)
    assert first.call("PUT", "/api/contents/notes.txt", {"content": "epoch 3 was best"}, headers=TOKEN)[0] == 200
    assert first.call("GET", "/api/contents", headers=TOKEN)[1]["content"] == [
        {"name": "notes.txt", "type": "file", "size": 16}]
    first.stop()
    second = start(start_process, home)
    status, file = second.call("GET", "/api/contents/notes.txt", headers=TOKEN)
    assert status == 200 and file["content"] == "epoch 3 was best"


def test_the_process_measures_its_own_cpu(start_process, tmp_path):
    """Real CPU use, measured by the process: quiet at rest, above the asked threshold while code burns a
    core, and the age since it last was afterwards."""
    notebook = start(start_process, tmp_path)
    time.sleep(1.5)
    _, rest = notebook.call("GET", "/metrics?format=json&cpu_pct=5", headers=TOKEN)
    assert rest["cpu"]["percent"] < 5 and rest["cpu"]["busy_age_s"] is None
    _, kernel = notebook.call("POST", "/api/kernels", {"name": "python3"}, headers=TOKEN)
    assert notebook.call("POST", f"/api/kernels/{kernel['id']}/execute", {"seconds": 2.5, "cpu": 1.0},
                         headers=TOKEN)[0] == 202
    time.sleep(2.2)
    _, busy = notebook.call("GET", "/metrics?format=json&cpu_pct=5", headers=TOKEN)
    # a sample above 5 % of a core within the last second or so (a shared machine may slow the burn down)
    assert busy["cpu"]["busy_age_s"] < 1.5 and busy["cpu"]["percent"] > rest["cpu"]["percent"]
    assert notebook.call("POST", f"/api/kernels/{kernel['id']}/execute", {"cpu": 2}, headers=TOKEN)[0] == 400
    _, text = notebook.call("GET", "/metrics", headers=TOKEN)
    assert "sim_process_cpu_percent " in text
