"""Delivery guarantees of the node agent against a fake portal over real HTTP."""

from __future__ import annotations

import json
import logging
import random
import threading
from datetime import UTC, datetime, timedelta

import pytest

from nodeagent.agent import Agent, AgentConfig
from nodeagent.portal import PortalClient, backoff_delay
from nodeagent.samples import UsageSample
from nodeagent.simulated import Assignment, SimulatedCollector
from nodeagent.spool import Spool

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
PODS = [Assignment("pod-a", 0, 500, 20000), Assignment("pod-b", 0, 500, 20000), Assignment("pod-c", 1, 1000, 70000)]
READINGS_PER_TICK = 2 + len(PODS)  # one per GPU plus one per pod


class RecordingSpool(Spool):
    """A real spool that also remembers every id it ever stored, to check nothing went missing."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.added: set[str] = set()

    def add(self, samples):
        samples = list(samples)
        self.added.update(s.id for s in samples)
        return super().add(samples)


def make_agent(portal, spool_path, token: str | None = None, **config) -> Agent:
    settings = {"node": "node-1", "interval_s": 10.0, "backoff_base_s": 0.01, "backoff_cap_s": 0.05} | config
    collector = SimulatedCollector(lambda: PODS, node="node-1", gpus=2, seed=7)
    return Agent(AgentConfig(**settings), collector, RecordingSpool(spool_path), PortalClient(portal.url, token or portal.token),
                 rng=random.Random(1))


def collect_ticks(agent: Agent, first: int, count: int) -> None:
    for tick in range(first, first + count):
        agent.collect_once(T0 + timedelta(seconds=10 * tick))


def test_portal_down_then_up_every_sample_arrives_exactly_once(portal, tmp_path):
    agent = make_agent(portal, tmp_path / "spool.sqlite")
    portal.stop()
    for tick in range(6):  # an outage spanning six intervals, with a retry after each
        collect_ticks(agent, tick, 1)
        assert agent.flush().error is not None
    assert agent.spool.count() == 6 * READINGS_PER_TICK

    portal.start()  # same port
    report = agent.flush()

    assert report.error is None and report.accepted == 6 * READINGS_PER_TICK
    assert set(portal.samples) == agent.spool.added
    assert set(portal.times_received.values()) == {1}
    assert agent.spool.count() == 0


def test_restarted_agent_on_same_spool_loses_and_doubles_nothing(portal, tmp_path):
    path = tmp_path / "spool.sqlite"
    portal.status = 503
    first = make_agent(portal, path)
    collect_ticks(first, 0, 3)
    assert first.flush().error.startswith("POST")
    produced = set(first.spool.added)
    first.spool.close()  # the process ends; only the file remains

    portal.status = 200
    second = make_agent(portal, path)
    assert second.spool.count() == 3 * READINGS_PER_TICK
    collect_ticks(second, 3, 2)
    second.flush()

    produced |= second.spool.added
    assert len(produced) == 5 * READINGS_PER_TICK
    assert set(portal.samples) == produced
    assert set(portal.times_received.values()) == {1}


def test_batch_sent_twice_is_counted_once(portal, tmp_path):
    agent = make_agent(portal, tmp_path / "spool.sqlite", batch_size=4)
    collect_ticks(agent, 0, 2)  # 10 samples -> batches of 4, 4, 2
    portal.lose_answers = 1  # the portal stores the first batch but the agent never hears back

    assert "failed" in agent.flush().error
    assert agent.spool.count() == 10  # nothing left the spool without an answer
    agent.flush()

    assert agent.spool.count() == 0
    assert set(portal.samples) == agent.spool.added
    assert sorted(portal.times_received.values()) == [1] * 6 + [2] * 4  # the lost batch came again
    assert portal.batch_sizes == [4, 4, 4, 2]


def test_rejected_samples_go_to_dead_letter_with_reason_and_are_not_resent(portal, tmp_path, caplog):
    agent = make_agent(portal, tmp_path / "spool.sqlite")
    collect_ticks(agent, 0, 1)
    bad = sorted(agent.spool.added)[:2]
    portal.reject = {bad[0]: "unknown pod", bad[1]: "gpu_util_pct out of range"}

    with caplog.at_level(logging.WARNING, logger="nodeagent"):
        report = agent.flush()
    collect_ticks(agent, 1, 1)
    agent.flush()
    agent.flush()

    assert report.rejected == 2 and report.accepted == READINGS_PER_TICK - 2
    assert agent.spool.count() == 0
    lines = [json.loads(line) for line in agent.spool.dead_letter_path.read_text().splitlines()]
    assert {(line["id"], line["reason"]) for line in lines} == set(portal.reject.items())
    assert all(line["sample"]["id"] == line["id"] for line in lines)
    assert agent.spool.dead_letter_path.parent == tmp_path
    assert portal.times_received[bad[0]] == portal.times_received[bad[1]] == 1
    assert set(portal.samples) == agent.spool.added - set(bad)
    assert "unknown pod" in caplog.text


def test_samples_the_portal_did_not_answer_for_stay_spooled_and_are_resent(portal, tmp_path):
    agent = make_agent(portal, tmp_path / "spool.sqlite")
    collect_ticks(agent, 0, 1)
    skipped = sorted(agent.spool.added)[0]
    portal.unanswered = {skipped}

    agent.flush()
    assert [s["id"] for s in agent.spool.pending(10)] == [skipped]
    portal.unanswered = set()
    agent.flush()

    assert agent.spool.count() == 0
    assert set(portal.samples) == agent.spool.added
    assert portal.times_received[skipped] == 2


def test_refused_token_keeps_samples_logs_clearly_and_backs_off(portal, tmp_path, caplog):
    agent = make_agent(portal, tmp_path / "spool.sqlite", token="revoked-token")
    collect_ticks(agent, 0, 2)

    with caplog.at_level(logging.ERROR, logger="nodeagent"):
        report = agent.flush()

    assert "401" in report.error and "token" in report.error
    assert "refused this node's token" in caplog.text
    assert agent.spool.count() == 2 * READINGS_PER_TICK
    assert agent.retry_at > 0  # the run loop waits before the next try
    assert portal.samples == {}

    portal.token = "revoked-token"  # the operator fixes the token on the portal side
    assert agent.flush().accepted == 2 * READINGS_PER_TICK
    assert agent.retry_at == 0


def test_large_backlog_is_sent_in_batches_and_split_on_413(portal, tmp_path):
    agent = make_agent(portal, tmp_path / "spool.sqlite", batch_size=8)
    collect_ticks(agent, 0, 4)  # 20 samples
    portal.max_batch = 5

    report = agent.flush()

    assert report.accepted == 20 and agent.spool.count() == 0
    assert portal.batch_sizes == [4, 4, 4, 4, 4]  # 8 -> 413 -> halved to 4


def test_run_loop_rides_out_an_outage_and_flushes_on_stop(portal, tmp_path):
    agent = make_agent(portal, tmp_path / "spool.sqlite", interval_s=0.05, heartbeat_every=4,
                       backoff_base_s=0.02, backoff_cap_s=0.08)
    portal.status = 503
    runner = threading.Thread(target=agent.run, daemon=True)
    runner.start()
    threading.Event().wait(0.4)
    down_ticks = agent.spool.count() // READINGS_PER_TICK
    portal.status = 200
    threading.Event().wait(0.4)
    agent.stop()
    runner.join(timeout=5)

    assert not runner.is_alive()
    assert down_ticks >= 2  # samples piled up while the portal answered 503
    assert agent.spool.count() == 0
    assert set(portal.samples) == agent.spool.added
    assert len(agent.spool.added) % READINGS_PER_TICK == 0
    assert set(portal.times_received.values()) == {1}
    assert portal.heartbeats and len(portal.heartbeats[-1]["gpus"]) == 2


def test_a_started_agent_heartbeats_before_it_sends_its_backlog(portal, tmp_path):
    """A restarted agent tells the portal it is up before the spool's backlog, however late its own first
    interval comes (on a busy machine the uploader may run first): stopped once the backlog is sent, it has
    still been heard."""
    starts = iter([100.0, 99.0])  # the loop's first look at the clock finds its first tick not yet due
    agent = Agent(
        AgentConfig(node="node-1", interval_s=10.0, backoff_base_s=0.01, backoff_cap_s=0.05, batch_size=5),
        SimulatedCollector(lambda: PODS, node="node-1", gpus=2, seed=7), RecordingSpool(tmp_path / "spool.sqlite"),
        PortalClient(portal.url, portal.token), rng=random.Random(1),
        monotonic=lambda: next(starts, 99.0))
    collect_ticks(agent, 0, 4)  # 20 samples held from before the restart
    runner = threading.Thread(target=agent.run, daemon=True)
    runner.start()
    for _ in range(200):
        if agent.spool.count() == 0:
            break
        threading.Event().wait(0.01)
    agent.stop()
    runner.join(timeout=5)
    assert agent.spool.count() == 0
    assert portal.posts[0] == "/api/v1/agent/heartbeat", portal.posts[:3]


def test_spool_keeps_a_sample_once_and_survives_reopening(tmp_path):
    agent_spool = Spool(tmp_path / "s.sqlite")
    collector = SimulatedCollector(lambda: PODS, node="n", gpus=2)
    samples = [UsageSample.from_reading("n", T0, 10, r) for r in collector.sample(T0)]
    assert agent_spool.add(samples) == len(samples)
    assert agent_spool.add(samples) == 0
    agent_spool.close()
    reopened = Spool(tmp_path / "s.sqlite")
    assert [s["id"] for s in reopened.pending(100)] == [s.id for s in samples]
    assert reopened.pending(100)[0] == samples[0].to_json()


@pytest.mark.parametrize("failures", range(1, 15))
def test_backoff_grows_exponentially_with_jitter_and_is_capped(failures):
    rng = random.Random(failures)
    ceiling = min(30.0, 0.5 * 2 ** (failures - 1))
    delays = [backoff_delay(failures, 0.5, 30.0, rng) for _ in range(200)]
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(set(delays)) > 100  # jittered, so many nodes do not retry in lockstep
