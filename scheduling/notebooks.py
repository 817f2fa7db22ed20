"""Notebooks at run time: what a launch adds for them (token, base URL, home volume), where the portal
serves them (`/nb/<workspace>/<name>/`), and their kernel activity, read from the server's own API.

The server is Jupyter's API (the simulated backend's notebook_server speaks it too): `api/status`
gives the last activity, `api/kernels` which kernels are busy. The simulated server also answers
`metrics?format=json` with the age of its last kernel activity and the GPU use of its kernels' code,
measured by the process itself; a real Jupyter has no such figures, and its GPU use is what the node
agents sample (billing's idle check reads those).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

import httpx
from django.conf import settings
from django.utils.crypto import salted_hmac

from scheduling import kinds
from scheduling.backends.base import Endpoint
from scheduling.models import ACTIVE_STATES, Job, JobState, Replica
from scheduling.spec import SpecError, parse_job_spec_obj
from scheduling.spec.workloads import NOTEBOOK_ROLE, NotebookSpec

log = logging.getLogger(__name__)

ACTIVITY_TIMEOUT_S = 2.0


def base_url(workspace: str, name: str) -> str:
    """The path a notebook answers under, the same on the portal (its proxy forwards it unchanged)."""
    return f"/nb/{workspace}/{name}/"


def notebook_token(job_id: int) -> str:
    """The notebook server's token: derived from the platform's secret, never stored, never shown to a
    browser (the portal's proxy adds it to each request it forwards)."""
    return salted_hmac("scheduling.notebooks.token", str(job_id)).hexdigest()


def notebook_spec(job: Job) -> NotebookSpec:
    """The notebook part of a stored spec (its defaults for a spec that cannot be read back)."""
    try:
        return parse_job_spec_obj(job.spec).notebook or NotebookSpec()
    except (SpecError, TypeError, ValueError):
        log.warning("job %s: its stored spec has no readable notebook part", job.pk)
        return NotebookSpec()


def idle_after_s(job: Job, pool_idle_window_min: int) -> int:
    """Seconds without kernel activity and GPU use after which the notebook stops (the spec's idleAfter,
    else the pool's idle window)."""
    spec = notebook_spec(job)
    return spec.idle_after_s if spec.idle_after_s is not None else pool_idle_window_min * 60


def running_replica(job: Job) -> Replica | None:
    """The notebook's placement that holds its slice now, if it runs."""
    if job.kind not in kinds.idled_by_activity() or job.state not in (JobState.SCHEDULED, JobState.RUNNING):
        return None
    return (job.replicas.filter(state__in=ACTIVE_STATES, role=NOTEBOOK_ROLE, node__isnull=False)
            .select_related("node__pool").order_by("-attempt").first())


def endpoint_of(job: Job, backend) -> Endpoint | None:
    """Where the notebook's server answers now (None: not running, or not listening yet)."""
    replica = running_replica(job)
    if replica is None or replica.state != JobState.RUNNING:
        return None
    found = backend.endpoint((job.pk, replica.role, replica.index), workspace=job.workspace.slug,
                             base_url=base_url(job.workspace.slug, job.name))
    return None if found is None else Endpoint(url=found.url, token=notebook_token(job.pk))


# --------------------------------------------------------------------------- activity


@dataclass(frozen=True)
class Activity:
    """What the server says now. Ages are seconds on the server's clock (wall time)."""

    kernel_idle_s: float  # since the last kernel activity (the server's start when none)
    busy_kernels: int
    gpu_measured: bool  # the server measures its own GPU use (the simulated one): no need for samples
    gpu_busy: bool = False
    # the server's own CPU use (the simulated one; None: not measured): percent of a core over its last
    # seconds, and seconds since it was last above the asked threshold (None: never)
    cpu_pct: float | None = None
    cpu_busy_age_s: float | None = None


def _auth(endpoint: Endpoint) -> dict[str, str]:
    return {"Authorization": f"token {endpoint.token}"} if endpoint.token else {}


def read_activity(endpoint: Endpoint, *, timeout: float = ACTIVITY_TIMEOUT_S,
                  transport: httpx.BaseTransport | None = None) -> Activity | None:
    """The server's kernel activity, None when it does not answer (then nothing can be told from it)."""
    try:
        with httpx.Client(timeout=timeout, transport=transport, headers=_auth(endpoint)) as client:
            metrics = client.get(endpoint.url + "metrics", params={"format": "json", "cpu_pct": settings.IDLE_CPU_PCT})
            figures = _json(metrics)
            if isinstance(figures, dict) and isinstance(figures.get("last_kernel_activity_age_s"), int | float):
                gpu = figures.get("gpu") if isinstance(figures.get("gpu"), dict) else {}
                cpu = figures.get("cpu") if isinstance(figures.get("cpu"), dict) else {}
                return Activity(kernel_idle_s=max(0.0, float(figures["last_kernel_activity_age_s"])),
                                busy_kernels=int(figures.get("busy_kernels") or 0), gpu_measured=True,
                                gpu_busy=float(gpu.get("utilisation") or 0) > 0,
                                cpu_pct=_figure(cpu.get("percent")), cpu_busy_age_s=_figure(cpu.get("busy_age_s")))
            return _jupyter_activity(client, endpoint)
    except (httpx.HTTPError, ValueError, TypeError) as error:
        log.info("notebook at %s did not tell its activity: %s", endpoint.url, error)
        return None


def _figure(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _json(response: httpx.Response):
    if response.status_code != 200 or "json" not in response.headers.get("content-type", ""):
        return None
    return response.json()


def _jupyter_activity(client: httpx.Client, endpoint: Endpoint) -> Activity | None:
    """Jupyter Server's own API: the last activity (against the server's Date header, so the two clocks
    need not agree) and the kernels' execution states."""
    status = client.get(endpoint.url + "api/status")
    body = _json(status)
    if not isinstance(body, dict) or not isinstance(body.get("last_activity"), str):
        return None
    last = datetime.fromisoformat(body["last_activity"].replace("Z", "+00:00"))
    said = status.headers.get("date")
    server_now = parsedate_to_datetime(said) if said else None
    if server_now is None or last.tzinfo is None:
        return None
    kernels = _json(client.get(endpoint.url + "api/kernels"))
    busy = sum(1 for k in kernels if isinstance(k, dict) and k.get("execution_state") == "busy") \
        if isinstance(kernels, list) else 0
    return Activity(kernel_idle_s=max(0.0, (server_now - last).total_seconds()), busy_kernels=busy,
                    gpu_measured=False)
