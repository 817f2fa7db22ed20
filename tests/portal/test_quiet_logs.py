"""Quiet logs: one INFO line per request; node agents, polling, probes and static files at DEBUG; the
beat's routine tasks and websocket open/close at DEBUG; processes wait for their services with one line,
never a traceback; `make run` ends with one banner naming the URL and the demo logins."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from portal import run, wait
from portal.banner import banner_text, demo_logins
from portal.testing import ROOT

pytestmark = pytest.mark.django_db


def request_lines(caplog):
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "portal.requests"]


def test_one_info_line_per_page_request(client, tenants, caplog):
    caplog.set_level(logging.DEBUG, logger="portal.requests")
    client.force_login(tenants.alice)
    client.get("/account/preferences/")
    client.get("/no/such/page/")
    lines = request_lines(caplog)
    assert [(level, msg.rsplit(" ", 2)[0]) for level, msg in lines] == [
        ("INFO", "GET /account/preferences/ 200"), ("INFO", "GET /no/such/page/ 404")]
    assert not [r for r in caplog.records if r.name == "django.request"]  # the 404 is not logged twice


@pytest.mark.parametrize(("method", "path"), [
    ("post", "/api/v1/agent/heartbeat"), ("post", "/api/v1/agent/usage"), ("get", "/api/v1/agent/assignments?node=x"),
    ("get", "/healthz"), ("get", "/metrics"), ("get", "/static/portal/site.css"), ("get", "/favicon.ico"),
    ("get", "/console/?partial=1"), ("get", "/jobs/1/log/"),
])
def test_heartbeats_polling_and_probes_are_debug(client, tenants, caplog, method, path):
    caplog.set_level(logging.DEBUG, logger="portal.requests")
    client.force_login(tenants.admin)
    getattr(client, method)(path)
    assert [level for level, _ in request_lines(caplog)] == ["DEBUG"]
    caplog.clear()
    caplog.set_level(logging.INFO, logger="portal.requests")
    getattr(client, method)(path)
    assert request_lines(caplog) == []


@pytest.mark.parametrize(("logger", "message", "routine"), [
    ("celery.beat", "Scheduler: Sending due task scheduling-cycle (scheduling.tasks.scheduling_cycle)", True),
    ("celery.worker.strategy", "Task scheduling.tasks.scheduling_cycle[1f2e] received", True),
    ("celery.app.trace", "Task billing.tasks.post_usage[1f2e] succeeded in 0.01s: 3", True),
    ("celery.app.trace", "Task billing.reports.tasks.build_excel_export[1f2e] succeeded in 2.0s: 1", False),
    ("uvicorn.error", "connection open", True),
    ("uvicorn.error", "connection closed", True),
    ("uvicorn.error", '127.0.0.1:5000 - "WebSocket /ws/cluster/" [accepted]', False),
])
def test_routine_lines_are_debug(caplog, monkeypatch, logger, message, routine):
    monkeypatch.setattr(logging.getLogger("uvicorn"), "propagate", True)  # to caplog's handler on the root
    log = logging.getLogger(logger)
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger="uvicorn")  # LOG_LEVEL sets it as the root's
    log.info(message)
    log.error(message)  # a failure keeps its level whatever it names
    assert [r.levelname for r in caplog.records] == (["ERROR"] if routine else ["INFO", "ERROR"])
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="uvicorn")
    log.info(message)
    assert [r.levelname for r in caplog.records] == ["DEBUG" if routine else "INFO"]


def test_waiting_says_once_what_it_waits_for_then_when_it_came():
    said, answers = [], iter(["refused", "refused", None])
    assert wait.wait_for({"redis": lambda: next(answers)}, timeout=10, interval=0.01, say=said.append)
    assert said[0] == "waiting for redis ..." and said[1].startswith("redis is up after ") and len(said) == 2


def test_waiting_gives_up_with_one_line():
    said = []
    assert not wait.wait_for({"redis": lambda: "Error 2 connecting"}, timeout=0.05, interval=0.01, say=said.append)
    assert said == ["waiting for redis ...", "gave up after 0 s: redis: Error 2 connecting"]


def test_the_wait_command_exits_1_without_a_traceback(tmp_path):
    env = {**os.environ, "REDIS_URL": f"unix://{tmp_path / 'nothing.sock'}?db=0", "VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "portal.wait", "--no-database", "--timeout", "1"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output and "waiting for redis ..." in output and "gave up after 1 s" in output


def test_the_banner_names_the_url_and_the_demo_logins_present(tenants):
    text = banner_text("http://127.0.0.1:8000", demo_logins())
    assert "GPU Platform is up: http://127.0.0.1:8000/" in text
    assert "admin    admin-demo    operator (staff): /console/ and /admin/" in text
    assert "alice    alice-demo    owner of vision-lab" in text
    assert "finance  finance-demo  finance of nlp-group, finance of vision-lab" in text
    assert "carol" not in text  # not a demo user
    assert "No demo users" in banner_text("http://127.0.0.1:8000", [])


def test_every_program_waits_for_its_services(tmp_path):
    procs = run.processes(8123, tmp_path, redis_command=["redis-server"])
    for name in ("web", "worker", "beat", "agents"):
        assert procs[name].startswith(f"{sys.executable} -m portal.wait && "), procs[name]
    assert "--http http://127.0.0.1:8123/healthz" in procs["agents"].split("nodeagent.fleet")[0]
    assert procs["banner"].startswith(f"{sys.executable} -m portal.wait --no-database --no-redis --http "
                                      "http://127.0.0.1:8123/healthz")
    assert "--no-access-log" in run.web_command(8123)  # the portal logs each request once, itself
    conf = run.config(8123, tmp_path, redis_command=["redis-server"])
    assert conf.count("password=") == 2  # the control socket asks for one, supervisorctl has it
    banner = conf.split("[program:banner]")[1].split("[program:")[0]
    assert "autorestart=false" in banner and "sed -u" not in banner  # printed as it is, once


def test_load_demo_quiets_the_cycles_it_replays():
    from portal.management.commands.load_demo import quiet_cycles

    logger = logging.getLogger("scheduling.cycle.run")
    with quiet_cycles():
        assert not logger.isEnabledFor(logging.INFO)
    assert logger.isEnabledFor(logging.INFO) == logging.getLogger().isEnabledFor(logging.INFO)


def test_make_demo_waits_for_the_database_first():
    demo = Path(ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert demo.index("portal.wait") < demo.index("migrate")
