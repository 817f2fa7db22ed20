"""The agent loop: collect every interval into the spool, upload in batches, heartbeat the inventory."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from nodeagent.portal import (
    PortalAuthError,
    PortalBatchTooLarge,
    PortalClient,
    PortalError,
    backoff_delay,
)
from nodeagent.samples import GpuInfo, Reading, UsageSample, format_ts
from nodeagent.spool import Spool

log = logging.getLogger(__name__)


class VolumeStats(Protocol):
    def read(self) -> list[dict]: ...

    def close(self) -> None: ...


class Collector(Protocol):
    def inventory(self) -> list[GpuInfo]: ...

    def sample(self, now: datetime) -> list[Reading]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class AgentConfig:
    node: str
    interval_s: float = 10.0
    batch_size: int = 500
    heartbeat_every: int = 2  # intervals between heartbeats: well inside the portal's NotReady window (60 s)
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 300.0
    shutdown_flush_s: float = 5.0  # how long a SIGTERM may spend sending what is spooled
    collector_name: str = ""
    volumes_every: int = 30  # intervals between readings of the kubelet's volume stats (the portal keeps one an hour)

    def __post_init__(self) -> None:
        if not self.node:
            raise ValueError("node name must not be empty")
        if self.interval_s <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {self.interval_s}")
        if self.batch_size < 1:
            raise ValueError(f"batch size must be >= 1, got {self.batch_size}")
        if self.volumes_every < 1:
            raise ValueError(f"volumes-every must be >= 1 interval, got {self.volumes_every}")
        if self.heartbeat_every < 1:
            raise ValueError(f"heartbeat-every must be >= 1 interval, got {self.heartbeat_every}")
        if not 0 < self.backoff_base_s <= self.backoff_cap_s:
            raise ValueError(
                f"backoff needs 0 < base <= cap, got base={self.backoff_base_s} cap={self.backoff_cap_s}"
            )


@dataclass
class FlushReport:
    sent: int = 0  # samples posted (a batch posted twice counts twice)
    accepted: int = 0
    rejected: int = 0
    error: str | None = None  # why the last attempt failed; None when it did not


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        collector: Collector,
        spool: Spool,
        client: PortalClient,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        rng: random.Random | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        volume_stats: VolumeStats | None = None,
    ) -> None:
        self.config = config
        self.volume_stats = volume_stats
        self.collector = collector
        self.spool = spool
        self.client = client
        self.stop_event = threading.Event()
        self._clock = clock
        self._rng = rng or random.Random()
        self._monotonic = monotonic
        self._batch_size = config.batch_size
        self._failures = 0
        self._retry_at = 0.0  # monotonic time before which no upload is tried
        self._ticks = 0
        self._wake = threading.Event()  # new samples, or stopping: the uploader looks again
        self._heartbeat_due = threading.Event()
        self._volumes_due = threading.Event()
        self.rejected_total = 0  # samples the portal refused as invalid since start (dead-lettered)

    @property
    def retry_at(self) -> float:
        """Monotonic time before which the run loop will not try to upload (0: no failure pending)."""
        return self._retry_at

    # -- one step each ---------------------------------------------------------------------------

    def collect_once(self, now: datetime | None = None) -> int:
        """Read the collector once and spool the samples. Returns how many were stored."""
        now = now or self._clock()
        readings = self.collector.sample(now)
        samples = [UsageSample.from_reading(self.config.node, now, self.config.interval_s, r) for r in readings]
        return self.spool.add(samples)

    def flush(self, deadline: float | None = None) -> FlushReport:
        """Send spooled samples in batches until the spool is empty, an attempt fails, or `deadline`."""
        report = FlushReport()
        while True:
            batch = self.spool.pending(self._batch_size)
            if not batch:
                break
            try:
                result = self.client.send_usage(self.config.node, batch)
            except PortalBatchTooLarge as exc:
                if self._batch_size == 1:
                    report.error = str(exc)
                    self._note_failure(exc)
                    break
                self._batch_size = max(1, self._batch_size // 2)
                log.warning("portal refused a batch as too large; batches are now %d samples", self._batch_size)
                continue
            except PortalAuthError as exc:
                report.error = str(exc)
                self._note_failure(exc, level=logging.ERROR)
                break
            except PortalError as exc:
                report.error = str(exc)
                self._note_failure(exc)
                break
            report.sent += len(batch)
            by_id = {s["id"]: s for s in batch}
            accepted = [i for i in result.accepted if i in by_id]
            accepted_set = set(accepted)
            rejected = {i: r for i, r in result.rejected.items() if i in by_id and i not in accepted_set}
            self.spool.remove(accepted)
            if rejected:
                self.spool.dead_letter(rejected, by_id)
                for sid, reason in rejected.items():
                    log.warning("portal rejected sample %s: %s (kept in %s, not resent)",
                                sid, reason, self.spool.dead_letter_path)
            report.accepted += len(accepted)
            report.rejected += len(rejected)
            self.rejected_total += len(rejected)
            if not accepted and not rejected:
                # The portal answered but took nothing from this batch: do not spin on it.
                report.error = "portal answered without accepting or rejecting any sample of the batch"
                self._note_failure(PortalError(report.error))
                break
            if self._failures:
                log.info("portal reachable again after %d failed attempts", self._failures)
            self._failures = 0
            self._retry_at = 0.0
            if len(batch) < self._batch_size or (deadline is not None and self._monotonic() >= deadline):
                break
        return report

    def _note_failure(self, exc: Exception, level: int = logging.WARNING) -> None:
        self._failures += 1
        delay = backoff_delay(self._failures, self.config.backoff_base_s, self.config.backoff_cap_s, self._rng)
        self._retry_at = self._monotonic() + delay
        log.log(level, "upload failed (attempt %d), %d samples kept in the spool, retry in %.1f s: %s",
                self._failures, self.spool.count(), delay, exc)

    def _health(self) -> dict[int, dict]:
        """The collector's per-GPU health figures; none when it has none or cannot read them (the
        heartbeat still goes: it is what tells the portal this node is alive)."""
        read = getattr(self.collector, "health", None)
        if read is None:
            return {}
        try:
            return read()
        except Exception:
            log.exception("heartbeat: reading GPU health failed; sent without it")
            return {}

    def heartbeat(self) -> bool:
        """Post the inventory with each GPU's health; returns whether the portal took it."""
        try:
            health = self._health()
            gpus = [{**gpu.to_json(), **health.get(gpu.index, {})} for gpu in self.collector.inventory()]
            answer = self.client.send_heartbeat(
                self.config.node,
                {
                    "ts": format_ts(self._clock()),
                    "collector": self.config.collector_name,
                    "interval_s": self.config.interval_s,
                    "spooled": self.spool.count(),
                    "gpus": gpus,
                },
            )
            refused = answer.get("rejected") if isinstance(answer, dict) else None
            for item in refused if isinstance(refused, list) else []:
                log.warning("portal refused a health figure: %s", item)
        except PortalAuthError as exc:
            log.error("heartbeat refused: %s", exc)
            return False
        except PortalError as exc:
            log.warning("heartbeat failed: %s", exc)
            return False
        except Exception:  # a collector failure must not stop the agent
            log.exception("heartbeat: reading the inventory failed")
            return False
        return True

    def send_volumes(self) -> int | None:
        """Read the kubelet's volume stats and post them; returns how many the portal kept (None: not sent).
        Nothing is spooled: the next reading comes soon, and the portal keeps one an hour."""
        if self.volume_stats is None:
            return None
        try:
            volumes = self.volume_stats.read()
            answer = self.client.send_volumes(self.config.node, volumes)
        except PortalError as exc:
            log.warning("volume stats not sent: %s", exc)
            return None
        except Exception:  # a kubelet that does not answer must not stop the agent
            log.exception("reading the kubelet's volume stats failed")
            return None
        kept = answer.get("volumes") if isinstance(answer, dict) else None
        return kept.get("recorded") if isinstance(kept, dict) else None

    def tick(self) -> None:
        """One interval: heartbeat (and volume stats) when due, then collect."""
        if self._ticks % self.config.heartbeat_every == 0:
            self.heartbeat()
        if self._ticks % self.config.volumes_every == 0:
            self.send_volumes()
        self._ticks += 1
        try:
            self.collect_once()
        except Exception:  # keep running: the next interval may read fine
            log.exception("collecting usage failed this interval")

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> None:
        """Sample every interval until stop_event is set (SIGTERM/SIGINT), then spend a short while
        flushing. Uploads and heartbeats run in a second thread: a portal that is slow to answer
        (its database down, say) must not delay a sample, or the intervals it misses go unmeasured."""
        interval = self.config.interval_s
        next_tick = self._monotonic()
        log.info("agent for node %s started: interval %.1f s, spool %s (%d samples waiting)",
                 self.config.node, interval, self.spool.path, self.spool.count())
        uploader = threading.Thread(target=self._upload_loop, name=f"uploader-{self.config.node}", daemon=True)
        # The first heartbeat goes before any backlog in the spool, whenever the first interval comes: the
        # portal hears the node is up at once.
        self._heartbeat_due.set()
        uploader.start()
        while not self.stop_event.is_set():
            if self._monotonic() >= next_tick:
                if self._ticks and self._ticks % self.config.heartbeat_every == 0:
                    self._heartbeat_due.set()
                if self.volume_stats is not None and self._ticks % self.config.volumes_every == 0:
                    self._volumes_due.set()
                self._ticks += 1
                try:
                    self.collect_once()
                except Exception:  # keep running: the next interval may read fine
                    log.exception("collecting usage failed this interval")
                self._wake.set()
                next_tick += interval
                if next_tick <= self._monotonic():  # a slow interval: skip the missed ones
                    next_tick = self._monotonic() + interval
            self.stop_event.wait(max(0.0, next_tick - self._monotonic()))
        self._wake.set()
        uploader.join()  # after its request in flight: one sender at a time
        report = self.flush(deadline=self._monotonic() + self.config.shutdown_flush_s)
        log.info("agent stopped: %d samples sent on shutdown, %d left in the spool%s",
                 report.accepted, self.spool.count(), f" ({report.error})" if report.error else "")

    def _upload_loop(self) -> None:
        """Send what is spooled when samples arrive, or when a backoff has run out; heartbeat when due."""
        while not self.stop_event.is_set():
            self._wake.clear()
            if self._heartbeat_due.is_set():
                self._heartbeat_due.clear()
                self.heartbeat()
            if self._volumes_due.is_set():
                self._volumes_due.clear()
                self.send_volumes()
            if self._monotonic() >= self._retry_at:
                # A deadline, so that a stop is noticed between batches of a long backlog.
                self.flush(deadline=self._monotonic() + self.config.interval_s)
                if self._retry_at <= self._monotonic() and self.spool.count():
                    continue  # more to send and no failure: go on
            wait = self._retry_at - self._monotonic() if self._retry_at > self._monotonic() else None
            self._wake.wait(wait)

    def stop(self) -> None:
        self.stop_event.set()
