"""Leader election on a coordination.k8s.io/v1 Lease, so that two worker replicas never run the scheduling
cycle at once.

As client-go does: a holder renews `renewTime`; another candidate takes the Lease once it has seen the same
record unchanged for `leaseDurationSeconds` by its own clock (so clock skew between pods does not matter);
every write carries the resourceVersion it read, and a 409 means someone else wrote first and won.
Celery sends each cycle to any worker process, so the task holds the Lease for one cycle and releases it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .retry import KubernetesApiError, RetryPolicy, call_with_retry, detail_of

log = logging.getLogger(__name__)


class LostLeadership(RuntimeError):
    """This process no longer holds the Lease: it must not change the cluster."""


def default_identity() -> str:
    """The pod's name (HOSTNAME in a pod) and the process id: Celery runs several processes per pod."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{os.getpid()}"


def micro_time(epoch: float) -> str:
    """A Kubernetes MicroTime. The client re-writes it with isoformat(), which drops a zero fraction the API
    server's MicroTime cannot parse: never send exactly zero microseconds."""
    moment = datetime.fromtimestamp(epoch, UTC)
    return (moment.replace(microsecond=moment.microsecond or 1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderLease:
    def __init__(self, api_client: client.ApiClient, name: str, namespace: str, identity: str,
                 duration_s: float, *, retry: RetryPolicy | None = None, request_timeout_s: float = 10.0,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        if duration_s < 1:
            raise ValueError("the lease duration must be at least 1 s")
        self.coordination = client.CoordinationV1Api(api_client)
        self.name, self.namespace, self.identity = name, namespace, identity
        self.duration_s = duration_s
        # a wait must not outlast the lease it is renewing
        self.retry = retry or RetryPolicy(attempts=3, base_s=0.2, cap_s=min(1.0, duration_s / 4))
        self.timeout = (request_timeout_s, request_timeout_s)
        self._clock, self._sleep = clock, sleep
        self._observed: tuple[str, float] | None = None  # (resourceVersion seen, local time first seen)
        self._renewed_at: float | None = None  # local time of our last successful write as holder

    @property
    def what(self) -> str:
        return f"lease {self.namespace}/{self.name}"

    def held(self) -> bool:
        """Whether we hold it by our own clock: renewed less than a lease duration ago."""
        return self._renewed_at is not None and self._clock() < self._renewed_at + self.duration_s

    def acquire(self) -> bool:
        """Take or renew the Lease; False when someone else holds it (or won the race to it)."""
        now = self._clock()
        try:
            lease = self._call("read", self.coordination.read_namespaced_lease, self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise KubernetesApiError(f"read {self.what}", e.status, detail_of(e)) from e
            return self._create(now)
        spec = lease.get("spec") or {}
        rv = lease["metadata"].get("resourceVersion", "")
        if self._observed is None or self._observed[0] != rv:
            self._observed = (rv, now)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.duration_s)
        if holder and holder != self.identity and now < self._observed[1] + duration:
            self._renewed_at = None
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
            spec["acquireTime"] = micro_time(now)
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=int(self.duration_s),
                    renewTime=micro_time(now), leaseTransitions=transitions)
        return self._write(lease, spec, now)

    def release(self) -> None:
        """Give the Lease up at once (the next candidate need not wait out the duration)."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        try:
            lease = self._call("read", self.coordination.read_namespaced_lease, self.name, self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.pop("holderIdentity", None)
            lease["spec"] = spec
            self._call("replace", self.coordination.replace_namespaced_lease, self.name, self.namespace, lease)
        except (ApiException, KubernetesApiError) as e:  # it expires by itself
            log.warning("could not release %s: %s", self.what, e)

    @contextlib.contextmanager
    def leading(self, every: float | None = None) -> Iterator[bool]:
        """Yields whether we lead; while we do, a thread renews the Lease every `every` seconds (a third of
        its duration), and it is released at the end. A lost renewal shows in held()."""
        try:
            leads = self.acquire()
        except KubernetesApiError as e:
            log.warning("leader election failed: %s", e)
            leads = False
        if not leads:
            yield False
            return
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(every if every is not None else self.duration_s / 3):
                try:
                    if not self.acquire():
                        log.warning("%s lost %s to another worker", self.identity, self.what)
                        return
                except KubernetesApiError as e:  # held() runs out unless a later try gets through
                    log.warning("renewing %s failed: %s", self.what, e)

        thread = threading.Thread(target=renew, name="lease-renewal", daemon=True)
        thread.start()
        try:
            yield True
        finally:
            stop.set()
            thread.join()
            self.release()

    # --- plumbing ----------------------------------------------------------------------------------------
    def _create(self, now: float) -> bool:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.duration_s),
                         "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}}
        try:
            self._call("create", self.coordination.create_namespaced_lease, self.namespace, body)
        except ApiException as e:
            if e.status == 409:  # another candidate created it first
                self._renewed_at = None
                return False
            raise KubernetesApiError(f"create {self.what}", e.status, detail_of(e)) from e
        self._renewed_at = now
        return True

    def _write(self, lease: dict, spec: dict, now: float) -> bool:
        lease["spec"] = spec  # metadata keeps the resourceVersion read: the server refuses a stale write
        try:
            written = self._call("replace", self.coordination.replace_namespaced_lease, self.name,
                                 self.namespace, lease)
        except ApiException as e:
            if e.status == 409:  # someone else wrote since our read, and won
                self._renewed_at = None
                return False
            raise KubernetesApiError(f"replace {self.what}", e.status, detail_of(e)) from e
        self._observed = (written["metadata"].get("resourceVersion", ""), now)
        self._renewed_at = now
        return True

    def _call(self, verb: str, fn: Callable[..., Any], *args: Any) -> dict:
        def once() -> dict:
            data = fn(*args, _preload_content=False, _request_timeout=self.timeout).data or b"{}"
            return json.loads(data)

        return call_with_retry(once, f"{verb} {self.what}", self.retry, self._sleep)
