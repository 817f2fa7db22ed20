"""Fault tests on real processes: a Celery worker killed in the middle of a scheduling cycle, the
embedded Redis killed and started again, and PostgreSQL cut away behind a TCP proxy while a node
agent keeps sampling.

Each waits generously and checks what must hold (nothing bound, launched or counted twice, nothing
lost, every part serving again); none asserts a duration. The recovery times are printed
(`pytest -s` shows them). FAULT_OUTAGE_S sets the database outage (default 8 s; 30 for the
full-length run); FAULT_PG_ADMIN_URL the PostgreSQL that test makes its throwaway database on.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from tests_faults_helpers import (
    Processes,
    TcpProxy,
    create_database,
    database_url_via,
    drop_database,
    postgres_unreachable_reason,
    wait_until,
    worker_command,
)
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from nodeagent.spool import Spool
from portal.testing import ROOT, child_env, free_port, wait_for_http

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FAULT_OUTAGE_S = float(os.environ.get("FAULT_OUTAGE_S", "8"))
REDIS_OUTAGE_S = 4.0  # a few beat intervals (SCHEDULER_INTERVAL_S=1 below)

ONE_GPU = """name: {name}
queue: {queue}
expectedDuration: 10h
roles:
  - name: main
    image: busybox
    resources: {{gpu: 1}}
    nodePool: h100
"""


@pytest.fixture
def procs(tmp_path):
    processes = Processes(tmp_path / "logs")
    yield processes
    processes.stop_all()


def say(line: str) -> None:
    print(f"\nFAULT {line}", flush=True)


# --- 1. a Celery worker killed mid-cycle --------------------------------------------------------

def drive_cycles(queue: str, timeout: float, marker: Path | None = None) -> tuple[dict | None, int]:
    """Send scheduling cycles one at a time, as beat does, until one completes: (its report, how
    many were skipped because another held the lock). With `marker`: until that file appears
    (a paused worker wrote it), then (None, skipped)."""
    from celery.exceptions import TimeoutError as ResultTimeout

    from portal.celery import app  # noqa: F401 - the app the task is sent through
    from scheduling.tasks import scheduling_cycle

    deadline = time.monotonic() + timeout
    skipped, pending = 0, scheduling_cycle.apply_async(queue=queue)
    while time.monotonic() < deadline:
        if marker is not None and marker.exists():
            return None, skipped
        try:
            report = pending.get(timeout=0.5)
        except ResultTimeout:
            continue
        if report is not None:
            return report, skipped
        skipped += 1
        time.sleep(0.5)
        pending = scheduling_cycle.apply_async(queue=queue)
    raise TimeoutError(f"no scheduling cycle {'paused' if marker else 'completed'} within {timeout:.0f} s")


def assert_bound_once(jobs: int) -> set[tuple]:
    """Every job placed exactly once, no GPU held twice, the backend runs each replica once."""
    from django.db.models import Count

    from scheduling.models import ACTIVE_STATES, JobEvent, Replica, SimulatedPod

    active = list(Replica.objects.filter(state__in=ACTIVE_STATES).values_list("job_id", "role", "index", "node_id",
                                                                             "gpu_indices"))
    keys = {(job, role, index) for job, role, index, _, _ in active}
    assert Replica.objects.count() == len(active) == len(keys) == jobs  # one placement each, no second attempt
    gpus = [(node, gpu) for *_, node, indices in active for gpu in indices]
    assert len(gpus) == len(set(gpus)) == jobs, "a GPU is bound twice"
    pods = list(SimulatedPod.objects.values_list("job_id", "role", "index"))
    assert len(pods) == len(set(pods)) and set(pods) == keys, "the backend does not run each replica once"
    scheduled = JobEvent.objects.filter(kind="scheduled").values("job").annotate(n=Count("id"))
    assert sorted(row["n"] for row in scheduled) == [1] * jobs, "a job was scheduled twice"
    return keys


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_cycle_binds_nothing_twice_and_the_next_cycle_runs(cluster, procs, tmp_path):
    import redis
    from django.conf import settings

    from billing.services import submit_quoted_job
    from scheduling.models import Job, JobState, Replica, SimulatedPod
    from scheduling.tasks import LOCK_NAME, LOCK_TTL_S

    jobs = 8  # on the 16 H100s of the test cluster: every one fits, so each cycle binds all or none
    for n in range(jobs):
        user, workspace = (cluster.alice, cluster.vision) if n % 2 == 0 else (cluster.bob, cluster.nlp)
        submit_quoted_job(user=user, workspace=workspace, spec=ONE_GPU.format(name=f"fault-{n}", queue=workspace.slug))
    queue = f"fault-{uuid.uuid4().hex[:8]}"  # its own queue: no other worker takes these cycles
    env = child_env(SIM_FAILURE_RATE="0")
    lock = redis.Redis.from_url(settings.REDIS_URL)

    # 1. Killed inside the transaction that applies the decisions: written, not committed.
    paused_a = tmp_path / "worker-a.json"
    procs.start("worker-a", worker_command("fault-a", queue, "before-commit", paused_a), env)
    report, _ = drive_cycles(queue, 120, marker=paused_a)
    assert report is None, f"the cycle did not pause: {report}"
    assert json.loads(paused_a.read_text()) == {"uncommitted_replicas": jobs}
    procs.kill("worker-a")
    killed_a = time.monotonic()
    # The dead worker's lock stays for a while, but not forever.
    assert 0 < lock.pttl(LOCK_NAME) <= LOCK_TTL_S * 1000
    assert not Replica.objects.exists()
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.PENDING}

    # 2. The next cycle, on another worker once the lock has expired: killed after its commit,
    # half way through launching on the backend.
    paused_b = tmp_path / "worker-b.json"
    procs.start("worker-b", worker_command("fault-b", queue, "mid-launch", paused_b), env)
    report, skipped_b = drive_cycles(queue, 120, marker=paused_b)
    next_cycle_s = time.monotonic() - killed_a
    assert report is None, f"the cycle did not pause: {report}"
    assert json.loads(paused_b.read_text()) == {"launched": jobs // 2, "of": jobs}
    procs.kill("worker-b")
    killed_b = time.monotonic()
    assert 0 < lock.pttl(LOCK_NAME) <= LOCK_TTL_S * 1000
    launched_b = {(p.job_id, p.role, p.index): p.launched for p in SimulatedPod.objects.all()}
    assert len(launched_b) == jobs // 2

    # 3. A plain worker: its first cycle launches the other half and nothing else.
    procs.start("worker-c", worker_command("fault-c", queue), env)
    report, skipped_c = drive_cycles(queue, 120)
    recovered_s = time.monotonic() - killed_b
    assert (report["binds"], report["evicts"], report["relaunched"], report["orphans_removed"]) == \
        (0, 0, jobs - jobs // 2, 0), report
    again, _ = drive_cycles(queue, 60)
    assert (again["binds"], again["evicts"], again["relaunched"], again["orphans_removed"]) == (0, 0, 0, 0), again

    assert_bound_once(jobs)
    launched = {(p.job_id, p.role, p.index): p.launched for p in SimulatedPod.objects.all()}
    assert {key: launched[key] for key in launched_b} == launched_b  # the first half was not launched again
    assert not lock.exists(LOCK_NAME)
    say(f"worker killed before its commit: the next cycle ran {next_cycle_s:.1f} s later "
        f"({skipped_b} skipped while the dead worker's lock lived; lock TTL {LOCK_TTL_S:g} s)")
    say(f"worker killed mid-launch: the next cycle completed {recovered_s:.1f} s later ({skipped_c} skipped)")


# --- 2. the embedded Redis killed and started again ---------------------------------------------

class OwnRedis:
    """The project's embedded redis-server on a socket of its own, to kill and start again."""

    def __init__(self, log: Path) -> None:
        # Short: a unix socket path holds at most 107 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="fault-redis-", dir="/tmp"))
        self.url = f"unix://{self.dir}/redis.sock?db=0"
        self.log = log
        self.proc = None

    def start(self) -> None:
        from portal import embedded_redis

        self.proc = embedded_redis.start(self.url, log_file=self.log)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def own_redis(tmp_path):
    server = OwnRedis(tmp_path / "redis.log")
    yield server
    server.close()


def _sample(node: str) -> dict:
    return {"id": str(uuid.uuid4()), "node": node, "ts": datetime.now(UTC).isoformat(), "gpu_uuid": f"GPU-{node}-0",
            "gpu_index": 0, "pod_uid": None, "gpu_util_pct": 40.0, "mem_used_mib": 1000, "interval_s": 10.0}


@pytest.mark.django_db(transaction=True)
def test_redis_killed_and_restarted_pages_serve_the_scheduler_waits_and_nothing_is_lost(
        cluster, own_redis, procs, client, tmp_path):
    from django.conf import settings

    from billing.metering.tokens import create_node_token
    from billing.models import UsageSample
    from portal.services import create_api_token
    from scheduling.models import ACTIVE_STATES, Job, JobState, Node, Replica

    own_redis.start()
    client.force_login(cluster.alice)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    _, api_token = create_api_token(cluster.alice, "fault")
    _, node_token = create_node_token(Node.objects.get(name="h100-01"))
    port = free_port()
    base, ws_base = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"
    env = child_env(REDIS_URL=own_redis.url, CELERY_QUEUE="fault-redis", SCHEDULER_INTERVAL_S="1",
                    SIM_FAILURE_RATE="0")
    web = procs.start("web", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                              "portal.asgi:application"], env)
    worker = procs.start("worker", worker_command("fault-redis", "fault-redis"), env)
    beat = procs.start("beat", [sys.executable, "-m", "celery", "-A", "portal", "beat", "-l", "INFO",
                                "-s", str(tmp_path / "beat-schedule")], env)
    wait_for_http(f"{base}/healthz", timeout=60, proc=web)
    api = httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {api_token}"})
    browser = httpx.Client(base_url=base, timeout=30, headers={"Cookie": cookie})
    agent = httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {node_token}"})

    def submit(name: str) -> int:
        answer = api.post("/api/v1/jobs/", json={"workspace": "vision-lab",
                                                 "spec": ONE_GPU.format(name=name, queue="vision-lab")})
        assert answer.status_code == 201, answer.text
        return answer.json()["id"]

    def placed(job_id: int) -> bool:
        return Job.objects.get(pk=job_id).state in ACTIVE_STATES

    def socket():
        return connect(f"{ws_base}/ws/workspaces/vision-lab/", origin=base, additional_headers={"Cookie": cookie},
                       open_timeout=15)

    # Before: beat and the worker schedule, a page's socket has joined.
    before = submit("before")
    wait_until(lambda: placed(before), 90, "the scheduler does not run")
    page = socket()
    assert json.loads(page.recv(timeout=15))["type"] == "hello"

    own_redis.kill()
    down_at = time.monotonic()
    # The open socket is told and closed, so its page shows the banner, reconnects and catches up.
    message = {"type": "event"}
    while message["type"] == "event":  # the first job's last events may come first
        message = json.loads(page.recv(timeout=30))
    assert message == {"type": "paused"}
    with pytest.raises(ConnectionClosed) as closed:
        page.recv(timeout=30)
    assert closed.value.rcvd.code == 4013
    told_s = time.monotonic() - down_at
    with socket() as refused:
        assert json.loads(refused.recv(timeout=15)) == {"type": "paused"}
    # Pages, the API and agent ingest keep serving; usage goes to the database.
    for path in ("/", "/jobs/"):
        assert browser.get(path).status_code == 200, path
    assert api.get("/api/v1/jobs/", params={"workspace": "vision-lab"}).status_code == 200
    during = submit("during")
    samples = [_sample("h100-01") for _ in range(3)]
    answer = agent.post("/api/v1/agent/usage", json={"node": "h100-01", "samples": samples})
    assert answer.status_code == 200 and len(answer.json()["accepted"]) == 3, answer.text
    health = httpx.get(f"{base}/readyz", timeout=30)
    assert health.status_code == 503 and health.json()["database"] == "ok", health.text
    assert health.json()["failing"] == ["redis"], health.text
    # The scheduler waits: no cycle runs without its lock, and nothing crashes.
    time.sleep(max(0.0, REDIS_OUTAGE_S - (time.monotonic() - down_at)))
    assert Job.objects.get(pk=during).state == JobState.PENDING
    assert not Replica.objects.filter(job_id=during).exists()
    assert web.poll() is None and worker.poll() is None and beat.poll() is None

    own_redis.start()
    up_at = time.monotonic()
    wait_until(lambda: httpx.get(f"{base}/readyz", timeout=30).status_code == 200, 60, "readyz stays 503")

    def joined():
        ws = socket()
        if json.loads(ws.recv(timeout=15))["type"] == "hello":
            return ws
        ws.close()
        return None

    page = wait_until(joined, 60, "a page's socket cannot join again", every=0.5)
    rejoined_s = time.monotonic() - up_at
    wait_until(lambda: placed(during), 90, "the scheduler does not resume")
    resumed_s = time.monotonic() - up_at
    # Events flow again to a socket that joined after the restart.
    after = submit("after")
    seen, deadline = [], time.monotonic() + 60
    while after not in seen:
        try:
            message = json.loads(page.recv(timeout=max(0.1, deadline - time.monotonic())))
        except TimeoutError:
            pytest.fail(f"the event of job {after} was lost; the web server said:\n{procs.log('web')[-4000:]}")
        if message["type"] == "event":
            seen.append(message["event"]["job"])
    page.close()
    assert UsageSample.objects.filter(id__in=[s["id"] for s in samples]).count() == 3
    assert web.poll() is None and worker.poll() is None and beat.poll() is None  # the same processes throughout
    say(f"redis down {REDIS_OUTAGE_S:g} s: open socket told to reconnect after {told_s:.1f} s; after the restart "
        f"a socket joined in {rejoined_s:.1f} s and the scheduler bound the waiting job in {resumed_s:.1f} s")


@pytest.mark.django_db
def test_no_cycle_runs_while_its_lock_is_unreachable(cluster, settings, caplog):
    from billing.services import submit_quoted_job
    from scheduling.models import JobState, Replica
    from scheduling.tasks import scheduling_cycle

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=ONE_GPU.format(name="wait", queue="vision-lab"))
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    assert scheduling_cycle() is None  # skipped, not failed: beat tries again next tick
    job.refresh_from_db()
    assert job.state == JobState.PENDING and not Replica.objects.exists()
    assert "lock is unreachable" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_cycle_that_lost_its_lock_commits_nothing(cluster, redis_server, monkeypatch, caplog):
    """Another worker took the lock while this cycle ran (its own had expired during a stall): the
    cycle's decisions are rolled back, and nothing is launched, instead of binding in parallel."""
    import redis

    from billing.services import submit_quoted_job
    from scheduling import tasks
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.models import JobState, Replica, SimulatedPod

    class LockTakenMidCycle(SimulatedBackend):
        def inventory(self):
            redis.Redis.from_url(redis_server).set(tasks.LOCK_NAME, "another-worker", px=10_000)
            return super().inventory()

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                            spec=ONE_GPU.format(name="lost", queue="vision-lab"))
    monkeypatch.setattr(tasks, "get_backend", LockTakenMidCycle)
    assert tasks.scheduling_cycle() is None
    job.refresh_from_db()
    assert job.state == JobState.PENDING and not Replica.objects.exists() and not SimulatedPod.objects.exists()
    assert "lost its lock" in caplog.text
    assert redis.Redis.from_url(redis_server).get(tasks.LOCK_NAME) == b"another-worker"  # not released by us

    monkeypatch.setattr(tasks, "get_backend", SimulatedBackend)
    redis.Redis.from_url(redis_server).delete(tasks.LOCK_NAME)
    assert tasks.scheduling_cycle()["binds"] == 1  # the next cycle that holds the lock binds it


# --- 3. PostgreSQL cut away while a node agent samples ------------------------------------------

def test_a_portal_that_does_not_answer_delays_no_sample(tmp_path):
    """The agent samples on its interval while its uploads hang until their timeout."""
    import socket as sockets

    from nodeagent.agent import Agent, AgentConfig
    from nodeagent.portal import PortalClient
    from nodeagent.simulated import SimulatedCollector

    with sockets.create_server(("127.0.0.1", 0)) as silent:  # accepts (the backlog), never answers
        agent = Agent(AgentConfig(node="n1", interval_s=0.1, backoff_base_s=0.1, backoff_cap_s=0.2),
                      SimulatedCollector(lambda: [], node="n1", gpus=1), Spool(tmp_path / "spool.sqlite"),
                      PortalClient(f"http://127.0.0.1:{silent.getsockname()[1]}", "t", timeout_s=1.5))
        runner = threading.Thread(target=agent.run, daemon=True)
        started = time.monotonic()
        runner.start()
        time.sleep(2.0)
        agent.stop()
        sampled_s = time.monotonic() - started
        runner.join(timeout=30)
    assert not runner.is_alive()
    # Every interval sampled (loosely), although no upload ever got an answer.
    assert agent.spool.count() >= max(3, sampled_s / 0.1 / 4), agent.spool.count()
    say(f"portal silent: the agent sampled {agent.spool.count()} times in {sampled_s:.1f} s at a 0.1 s interval")


@pytest.fixture
def scratch_postgres():
    """A throwaway database on the machine's PostgreSQL (skipped when there is none)."""
    if reason := postgres_unreachable_reason():
        pytest.skip(reason)
    name = f"gpuplatform_fault_{os.getpid()}"
    url = create_database(name)
    yield url
    drop_database(name)


class RecordingSpool(Spool):
    """The agent's real spool, remembering every sample it ever stored, by id."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.added: dict[str, dict] = {}
        self._added_lock = threading.Lock()  # the agent adds while the test reads

    def add(self, samples):
        samples = list(samples)
        with self._added_lock:
            self.added.update((s.id, s.to_json()) for s in samples)
        return super().add(samples)

    def ids(self) -> set[str]:
        with self._added_lock:
            return set(self.added)


def _gpu_hours(samples) -> Decimal:
    """GPU-hours used by replicas, as billing sums them: utilisation x interval."""
    return sum((Decimal(str(util)) / 100 * Decimal(str(interval)) / 3600 for util, interval in samples), Decimal(0))


def assert_unavailable_problem(response):
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json", response.text
    assert int(response.headers["Retry-After"]) > 0
    body = response.json()
    assert body["status"] == 503 and body["type"].endswith(":service-unavailable") and body["detail"], body


def test_database_cut_away_the_agent_spools_and_every_sample_arrives_once(scratch_postgres, procs, tmp_path):
    import psycopg

    from nodeagent.agent import Agent, AgentConfig
    from nodeagent.portal import PortalAuthError, PortalClient, PortalError
    from nodeagent.simulated import Assignment, SimulatedCollector

    env = child_env(DATABASE_URL=scratch_postgres, VAR_DIR=str(tmp_path / "var"))
    prepared = procs.start("prepare", [sys.executable, str(ROOT / "tests/reliability/tests_faults_helpers.py"),
                                       "prepare"], env)
    assert prepared.wait(timeout=240) == 0, procs.log("prepare")[-3000:]
    world = json.loads(procs.log("prepare").strip().splitlines()[-1])

    proxy = TcpProxy(("127.0.0.1", 5432)).start()
    try:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        # As production serves: Daphne with a connection pool and DEBUG off, here through the proxy.
        web_env = {**env, "DATABASE_URL": database_url_via(scratch_postgres, proxy.port), "DB_POOL": "1",
                   "RATE_LIMIT_AGENT": "100000/60", "DEBUG": "0", "SECRET_KEY": uuid.uuid4().hex * 2,
                   "SECURE_SSL_REDIRECT": "0", "CSRF_COOKIE_SECURE": "0", "SESSION_COOKIE_SECURE": "0"}
        web = procs.start("web", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                  "portal.asgi:application"], web_env)
        wait_for_http(f"{base}/healthz", timeout=60, proc=web)

        outcomes: list[tuple[float, object]] = []  # (when, "ok" or the error) for every upload

        class Client(PortalClient):
            def send_usage(self, node, samples):
                try:
                    result = super().send_usage(node, samples)
                except PortalError as exc:
                    outcomes.append((time.monotonic(), exc))
                    raise
                outcomes.append((time.monotonic(), "ok"))
                return result

        pods = [Assignment(p["pod_uid"], p["gpu_index"], p["milli"], p["memory_mib"]) for p in world["pods"]]
        spool = RecordingSpool(tmp_path / "agent" / "spool.sqlite")
        interval = 0.5
        agent = Agent(AgentConfig(node=world["node"], interval_s=interval, backoff_base_s=0.2, backoff_cap_s=1.0,
                                  shutdown_flush_s=20.0, collector_name="simulated"),
                      SimulatedCollector(lambda: pods, node=world["node"], gpus=2, seed=11), spool,
                      Client(base, world["token"], timeout_s=10.0))
        runner = threading.Thread(target=agent.run, name="agent", daemon=True)
        runner.start()

        def stored() -> dict[str, tuple]:
            with psycopg.connect(scratch_postgres, connect_timeout=10) as conn:
                rows = conn.execute("SELECT id::text, replica_id, gpu_util_pct, interval_s FROM billing_usagesample")
                return {row[0]: row[1:] for row in rows}

        try:
            wait_until(lambda: len(stored()) >= 8, 60, "the agent delivers nothing")
            browser = httpx.Client(base_url=base, timeout=60)
            assert browser.get("/login/").status_code == 200  # its CSRF cookie, for the login below

            proxy.cut()
            cut_at, cut_wall = time.monotonic(), datetime.now(UTC)
            # The portal answers, with a server error, instead of hanging on the database.
            started = time.monotonic()
            probe = httpx.post(f"{base}/api/v1/agent/usage", json={"node": world["node"], "samples": []},
                               headers={"Authorization": f"Bearer {world['token']}"}, timeout=60)
            answered_s = time.monotonic() - started
            # Unavailable, not broken: a problem document the agent and gpuctl read, with a retry hint.
            assert_unavailable_problem(probe)
            assert_unavailable_problem(httpx.get(f"{base}/api/v1/jobs/", timeout=60,
                                                 headers={"Authorization": f"Bearer {world['api_token']}"}))
            login = browser.post("/login/", data={"username": world["username"], "password": world["password"],
                                                  "csrfmiddlewaretoken": browser.cookies["csrftoken"]})
            assert login.status_code == 503 and "text/html" in login.headers["content-type"], login.text
            assert 'id="domain-error"' in login.text and "database" in login.text  # the styled page
            health = httpx.get(f"{base}/readyz", timeout=60)
            assert health.status_code == 503 and "database" in health.json()["failing"], health.text
            # Every request meanwhile: 503 with Retry-After, from the breaker without touching the database
            # (its detail says so) rather than each waiting for a pool timeout behind the others.
            api = {"Authorization": f"Bearer {world['api_token']}"}
            answers = []
            for _ in range(10):
                started = time.monotonic()
                answer = httpx.get(f"{base}/api/v1/jobs/", headers=api, timeout=60)
                answers.append((time.monotonic() - started, answer))
            for _, answer in answers:
                assert_unavailable_problem(answer)
            by_breaker = [a for _, a in answers if "moments ago" in a.json()["detail"]]
            assert by_breaker, [a.json()["detail"] for _, a in answers]
            page = browser.get("/")
            assert page.status_code == 503 and 'id="domain-error"' in page.text and int(page.headers["Retry-After"])
            slowest_s = max(seconds for seconds, _ in answers)
            time.sleep(max(0.0, FAULT_OUTAGE_S - (time.monotonic() - cut_at)))
            spooled = spool.count()
            assert spooled > 0  # kept while the portal cannot store them
            failed = [error for when, error in outcomes if when >= cut_at and error != "ok"]
            assert failed, "the agent never noticed the outage"
            assert not [e for e in failed if isinstance(e, PortalAuthError)], failed  # retried, never given up
            assert [e for e in failed if ": HTTP 5" in str(e)], failed  # the portal answered, with an error

            proxy.restore()
            up_at, up_wall = time.monotonic(), datetime.now(UTC)
            wait_until(lambda: httpx.get(f"{base}/api/v1/jobs/", headers=api, timeout=30).status_code == 200, 60,
                       "the API stays unavailable after the database is back", every=0.1)
            api_back_s = time.monotonic() - up_at
            produced_before = spool.ids()
            wait_until(lambda: produced_before <= set(stored()), 120, "samples from the outage never arrive",
                       every=0.5)
            arrived_s = time.monotonic() - up_at
            health = httpx.get(f"{base}/readyz", timeout=30)
            assert health.status_code == 200, health.text  # the portal's connections are back
        finally:
            agent.stop()
            runner.join(timeout=60)
        assert not runner.is_alive()
        assert spool.count() == 0, "samples left in the spool after the final flush"
        assert not spool.dead_letter_path.exists()
        rows = stored()
        assert set(rows) == set(spool.added)  # none lost, none extra
        by_pod = [s for s in spool.added.values() if s["pod_uid"] and s["gpu_util_pct"] is not None]
        assert sum(1 for replica, *_ in rows.values() if replica is not None) == len(by_pod)
        produced_hours = _gpu_hours((s["gpu_util_pct"], s["interval_s"]) for s in by_pod)
        stored_hours = _gpu_hours((util, seconds) for replica, util, seconds in rows.values()
                                  if replica is not None and util is not None)
        assert stored_hours == produced_hours > 0
        # It kept sampling at its interval while uploads failed (loosely: the machine may be busy).
        ticks = {s["ts"] for s in spool.added.values() if cut_wall <= datetime.fromisoformat(s["ts"]) < up_wall}
        assert len(ticks) >= max(3, (up_at - cut_at) / interval / 4), sorted(ticks)
        during = len([1 for when, error in outcomes if cut_at <= when < up_at and error != "ok"])
        say(f"database cut for {up_at - cut_at:.1f} s: the portal answered HTTP {probe.status_code} in "
            f"{answered_s:.2f} s, then {len(answers)} API requests each 503 in at most {slowest_s:.2f} s "
            f"({len(by_breaker)} from the breaker); the API answered again {api_back_s:.1f} s after the database's "
            f"return; the agent sampled {len(ticks)} times meanwhile ({spooled} samples spooled, "
            f"{during} failed uploads retried); every sample arrived {arrived_s:.1f} s after the database came back "
            f"({len(rows)} samples, {stored_hours:.6f} GPU-hours, none twice)")
    finally:
        proxy.cut()
