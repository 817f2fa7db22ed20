"""Quiet logs: one INFO line per request; node agents, polling, probes and static files at DEBUG; the
beat's routine tasks and websocket open/close at DEBUG; processes wait for their services with one line,
never a traceback; `make run` ends with one banner naming the URL and the demo logins."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from portal import logs, run, wait
from portal.banner import banner_text, demo_logins
from portal.testing import ROOT, child_env

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
    ("get", "/healthz"), ("get", "/readyz"), ("get", "/metrics"), ("get", "/static/portal/site.css"), ("get", "/favicon.ico"),
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
    assert "chen" not in text  # the Chinese-speaking team is not loaded here
    assert "No demo users" in banner_text("http://127.0.0.1:8000", [])


def test_the_banner_names_chen_once_the_chinese_team_is_loaded(cluster):
    from portal.demo.chinese import load_chinese_team

    load_chinese_team()
    text = banner_text("http://127.0.0.1:8000", demo_logins())
    assert "chen     chen-demo     owner of ai-lab" in text


def test_every_program_waits_for_its_services(tmp_path):
    procs = run.processes(8123, tmp_path, redis_command=["redis-server"])
    portal_up = f"{sys.executable} -m portal.wait --no-database --no-redis --http http://127.0.0.1:8123/readyz"
    assert procs["web"].startswith(f"{sys.executable} -m portal.wait && "), procs["web"]
    # the others once the web server answers (which needs the database, Redis and the migrations)
    for name in ("worker", "worker-long", "beat", "agents"):
        assert procs[name].startswith(portal_up), procs[name]
    # without a web server in the stack, each waits for the database and Redis itself
    alone = run.processes(8123, tmp_path, redis_command=["redis-server"], web=False)
    for name in ("worker", "worker-long", "beat", "agents"):
        assert alone[name].startswith(f"{sys.executable} -m portal.wait && "), alone[name]
    assert "--http http://127.0.0.1:8123/readyz" in procs["agents"].split("nodeagent.fleet")[0]
    assert procs["banner"].startswith(f"{sys.executable} -m portal.wait --no-database --no-redis --http "
                                      "http://127.0.0.1:8123/readyz")
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


def test_the_demo_month_plays_in_the_background_and_beat_waits_for_it(tmp_path):
    conf = run.config(8123, tmp_path, only=("web", "worker", "beat", "history"))
    history = conf.split("[program:history]")[1].split("[program:")[0]
    assert "autorestart=false" in history and "sed -u" in history  # runs once, its lines prefixed
    assert "manage.py load_demo; touch" in history  # beat starts even when the month could not be played
    beat = conf.split("[program:beat]")[1].split("[program:")[0]
    assert run.HISTORY_DONE in beat and beat.index(run.HISTORY_DONE) < beat.index("celery")
    without = run.config(8123, tmp_path, only=("web", "worker", "beat"))
    assert run.HISTORY_DONE not in without and "[program:history]" not in without


def test_make_run_answers_before_the_month_is_played():
    makefile = Path(ROOT / "Makefile").read_text()
    run_target = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "portal.prepare --demo base" in run_target and "--demo-history" in run_target


def test_make_prepare_waits_for_the_database_first(tmp_path):
    """portal.prepare (make prepare, demo and run) says it waits for an unreachable database and gives up,
    without migrating anything."""
    env = child_env(DATABASE_URL="postgres://postgres@127.0.0.1:1/nowhere", VAR_DIR=str(tmp_path / "var"),
                    STATIC_ROOT=str(tmp_path / "static"))
    done = subprocess.run([sys.executable, "-m", "portal.prepare", "--timeout", "1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "waiting for the database ..." in done.stdout and "gave up after 1 s" in done.stdout
    assert "Applying" not in done.stdout + done.stderr


def test_make_run_has_a_long_worker_beside_the_cycle_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("LONG_TASK_CONCURRENCY", "3")
    procs = run.processes(8123, tmp_path)
    long_worker = procs["worker-long"].split(" && exec ", 1)[1]
    assert long_worker == f"{sys.executable} -m celery -A portal --quiet worker -l INFO -Q long --concurrency 3 -n long@%h"
    assert procs["worker-long"].startswith(f"{sys.executable} -m portal.wait --no-database --no-redis --http ")
    assert " -Q " not in procs["worker"]   # the cycle's worker takes the default queue only
    conf = run.config(8123, tmp_path)
    program = conf.split("[program:worker-long]")[1].split("[program:")[0]
    assert "long@%%h" in program and "stopasgroup=false" in program   # its tasks end before it stops


def test_a_repeated_traceback_is_logged_once_a_minute_with_a_count(caplog):
    repeats, clock = logs.Repeats(window_s=60), [1000.0]
    repeats.now = lambda: clock[0]
    logger = logging.getLogger("tests.repeats")
    logger.addFilter(repeats)
    caplog.set_level(logging.ERROR, logger="tests.repeats")

    def fail(error: Exception):
        try:
            raise error
        except Exception:
            logger.exception("Unexpected exception in %s", "receive task")

    try:
        for n in range(5):
            fail(ConnectionError(f"refused, try {n}"))
            clock[0] += 1
        fail(TypeError("a first error of another kind"))   # the same words, another error: let through
        logger.error("another message")                    # other words: let through
        clock[0] += 60
        fail(ConnectionError("refused again"))             # the window is over: let through, with the count
        clock[0] += 61
        fail(ConnectionError("and again"))                 # nothing left out since: no count
    finally:
        logger.removeFilter(repeats)
    lines = [(r.getMessage(), r.exc_info[0].__name__ if r.exc_info else None)
             for r in caplog.records if r.name == "tests.repeats"]
    assert lines == [
        ("Unexpected exception in receive task", "ConnectionError"),
        ("Unexpected exception in receive task", "TypeError"),
        ("another message", None),
        ("Unexpected exception in receive task (4 more like it in the 60 s after the last one logged)",
         "ConnectionError"),
        ("Unexpected exception in receive task", "ConnectionError")]


def test_a_record_that_cannot_be_formatted_is_left_to_the_handler():
    record = logging.LogRecord("tests.repeats", logging.ERROR, __file__, 1, "%d items", ("many",), None)
    assert logs.Repeats().filter(record) is True


def test_the_channel_layers_receive_task_is_logged_through_the_repeats_filter():
    assert any(isinstance(f, logs.Repeats) for f in logging.getLogger("channels_redis.pubsub").filters)
