"""Finding idle GPU slices and carrying out their pool's idle policy (the beat's `check_idle_gpus`).

A placement (Replica) is idle when the mean GPU utilisation its node agent measured over the pool's
window stays below the pool's threshold. Utilisation is counted against the slice held: a 0.5 GPU
fraction at 2 % of the device uses 4 % of its slice. The window is the placement's own time, as billing
counts it (a simulated cluster runs faster than the wall clock). A placement is judged only once it has
held its slice for the whole window and its samples cover it; one whose device cannot report
utilisation (a MIG instance) is never idle.

An idle spell starts when a placement is first found idle (`Replica.idle_since`, the start of the
window) and ends when it is busy again. Once per spell the submitter is told: an e-mail and a job
event ("idle") on the job's page. With the action notify-then-stop, a job whose every running
placement has been idle and notified for the grace period is stopped (cancelled, paying for what it
held); training jobs only when the pool allows it (their kind's `idle_needs_pool_consent`).

Notebooks (their kind's `idle_by_activity`, scheduling.kinds) follow their own idle rule (scheduling/serving/idle.py): idle once neither a
kernel ran (as the notebook's server tells, scheduling/notebooks.py) nor the GPU was used for the spec's
`idleAfter` (else the pool's window). GPU use is the server's own figure when it measures it (the
simulated one), else the agents' samples above the pool's threshold. An idle notebook is always stopped,
not cancelled (`stop_workload`: its slice is free for the next cycle, its home kept, started again
at will): at once with the notice, or after the pool's grace when its action is notify-then-stop.

SSH traffic and CPU use count as activity too, for notebooks and for any job with an SSH session open in its
window (billing/idle/signals.py); the notice names the quiet signals. A notebook kept alive
(billing/idle/keep_alive.py) is skipped until its time.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Avg, Count, Max, Min
from django.utils.translation import gettext

from billing import history_catalogue as texts
from billing.idle import signals
from billing.idle.keep_alive import kept_alive
from billing.models import UsageSample
from billing.notices import Notice, raise_notice, written_in_english
from scheduling import kinds
from scheduling.api import (
    MILLI_PER_GPU,
    Conflict,
    Said,
    clock,
    history_texts,
    joined,
    notebooks,
    record_event,
    said,
    stop_job_by_policy,
    stop_workload,
)
from scheduling.api import idle_since as notebook_idle_since
from scheduling.models import ACTIVE_STATES, Job, JobState, NodePool, Replica

log = logging.getLogger(__name__)


def _idle_stop(job: Job, reason: str) -> None:
    """An idle job's kind may stop it (Stopped, started again at will) where others cancel it: its kind chooses
    (`end_idle`), billing carries it out (the kinds may not import the services that do it)."""
    stop_workload(None, job, reason)

# Samples may arrive a little late or start a little after the window opens.
MIN_SLACK = timedelta(seconds=30)


@dataclass
class IdleCheck:
    flagged: list[Replica] = field(default_factory=list)
    cleared: list[Replica] = field(default_factory=list)
    notified: list[Job] = field(default_factory=list)
    stopped: list[Job] = field(default_factory=list)


def slice_share(replica: Replica) -> float:
    """The share of each GPU the placement holds, against which its utilisation is judged."""
    s = replica.slice or {}
    if s.get("kind") == "fraction" and s.get("gpu_milli"):
        return max(0.001, min(1.0, s["gpu_milli"] / MILLI_PER_GPU))
    return 1.0


def window_of(replica: Replica, pool: NodePool) -> timedelta:
    """The pool's window in the wall time of the placement's samples."""
    return timedelta(minutes=pool.idle_window_min) / max(replica.clock_scale or 1.0, 1e-6)


def _stats(replicas: list[Replica], now: datetime) -> dict[int, dict]:
    """Per placement: mean utilisation, first and last sample over its window (one query per distinct window)."""
    by_window: dict[timedelta, list[int]] = defaultdict(list)
    for r in replicas:
        by_window[window_of(r, r.node.pool)].append(r.pk)
    out = {}
    for window, ids in by_window.items():
        rows = (UsageSample.objects.filter(replica_id__in=ids, ts__gt=now - window, ts__lte=now,
                                           gpu_util_pct__isnull=False)
                .values("replica_id").annotate(mean=Avg("gpu_util_pct"), first=Min("ts"), last=Max("ts"),
                                               samples=Count("id")))
        out.update({row["replica_id"]: row for row in rows})
    return out


def judge(replica: Replica, stats: dict | None, now: datetime) -> bool | None:
    """True: idle; False: busy; None: cannot tell yet (held less than the window, samples missing)."""
    pool = replica.node.pool
    window = window_of(replica, pool)
    slack = max(window / 4, MIN_SLACK)
    if stats is None or replica.started is None:
        return None
    if stats["last"] < now - slack:
        return None  # the agent stopped reporting: its silence is not idleness
    used = min(100.0, stats["mean"] / slice_share(replica))
    if used >= pool.idle_threshold_pct:
        return False
    if replica.started > now - window or stats["first"] > now - window + slack:
        return None  # below the threshold, but not for a whole window yet
    return True


def _last_gpu_use(replica: Replica, now: datetime) -> datetime | None:
    """The last agent sample in which the placement used its slice above its pool's threshold."""
    floor = replica.node.pool.idle_threshold_pct * slice_share(replica)
    return (UsageSample.objects.filter(replica=replica, ts__lte=now, gpu_util_pct__gte=floor)
            .aggregate(last=Max("ts"))["last"])


def notebook_wait(replica: Replica) -> timedelta:
    """A notebook's idle time in wall time: idleAfter is in the placement's own time, as billing counts it
    (a simulated cluster runs faster)."""
    return timedelta(seconds=notebooks.idle_after_s(replica.job, replica.node.pool.idle_window_min)) / max(
        replica.clock_scale or 1.0, 1e-6)


def judge_notebook(replica: Replica, now: datetime, activity: notebooks.Activity | None,
                   ssh_sent: int | None = None) -> tuple[datetime | bool | None, list[signals.Quiet]]:
    """When a notebook's idle spell began if it has lasted its idle time; False: not idle (long enough);
    None: cannot tell (its server did not answer). With it, the signals that were quiet over its idle time.
    `ssh_sent`: its SSH bytes over that time, None without an SSH session."""
    if signals.ssh_active(ssh_sent):
        return False, []
    if activity is None or replica.started is None:
        return None, []
    cpu_busy = activity.cpu_pct is not None and activity.cpu_pct > signals.cpu_pct()
    if activity.busy_kernels or activity.gpu_busy or cpu_busy:
        return False, []
    wait = notebook_wait(replica)
    last_kernel = now - timedelta(seconds=activity.kernel_idle_s)
    last_gpu = None if activity.gpu_measured else _last_gpu_use(replica, now)
    last_cpu = None if activity.cpu_busy_age_s is None else now - timedelta(seconds=activity.cpu_busy_age_s)
    since = datetime.fromtimestamp(notebook_idle_since(last_kernel.timestamp(), last_gpu and last_gpu.timestamp(),
                                                       replica.started.timestamp(),
                                                       last_cpu and last_cpu.timestamp()), tz=now.tzinfo)
    if now - since < wait:
        return False, []
    quiet = [signals.Quiet(signals.KERNEL, {})]
    if ssh_sent is not None:
        quiet.append(signals.ssh_quiet(ssh_sent))
    quiet += [signals.Quiet(signals.GPU, {"threshold": replica.node.pool.idle_threshold_pct}),
              signals.cpu_quiet(activity.cpu_pct)]
    return since, quiet


def judge_ssh_job(replica: Replica, gpu_verdict: bool | None, ssh_sent: int) -> tuple[bool | None, list[signals.Quiet]]:
    """A job other than a notebook with an SSH session open in its window: active while its SSH traffic
    or its GPUs are; its CPU is not measured (only the simulated notebook server tells it)."""
    if signals.ssh_active(ssh_sent):
        return False, []
    if not gpu_verdict:
        return gpu_verdict, []
    return True, [signals.ssh_quiet(ssh_sent),
                  signals.Quiet(signals.GPU, {"threshold": replica.node.pool.idle_threshold_pct}),
                  signals.cpu_quiet(None)]


def ssh_sent_by_replica(replicas: list[Replica], now: datetime, provider: signals.SshBytes) -> dict[int, int]:
    """Per placement whose job had an SSH session open in its window: the SSH bytes of that window (the
    provider asked once per distinct window)."""
    by_window: dict[timedelta, list[Replica]] = defaultdict(list)
    for replica in replicas:
        by_window[idle_rule(replica.job).window(replica)].append(replica)
    out = {}
    for window, members in by_window.items():
        sent = provider(now - window, now)
        out.update({r.pk: int(sent[r.job_id]) for r in members if r.job_id in sent})
    return out


def _running_replicas():
    return (Replica.objects.filter(state__in=ACTIVE_STATES, node__isnull=False, started__isnull=False)
            .select_related("node__pool", "job__workspace", "job__submitted_by").order_by("pk"))


def notebook_activities(backend=None) -> dict[int, notebooks.Activity | None]:
    """Per running notebook placement, what its server says now. Asked before the check's transaction:
    a server that is slow to answer must not hold the database."""
    replicas = list(_running_replicas().filter(job__kind__in=kinds.idled_by_activity(),
                                                   state=JobState.RUNNING))
    if not replicas:
        return {}
    if backend is None:
        from scheduling.api import get_backend

        backend = get_backend()
    out = {}
    for replica in replicas:
        endpoint = notebooks.endpoint_of(replica.job, backend)
        out[replica.pk] = notebooks.read_activity(endpoint) if endpoint is not None else None
    return out


def check_idle_gpus(*, now: datetime | None = None, backend=None, ssh_bytes: signals.SshBytes | None = None,
                    activities: dict[int, notebooks.Activity | None] | None = None) -> IdleCheck:
    """Flag the placements idle by their pool's policy, clear those busy again, notify once per
    spell, and stop what the policy stops. `backend` (default: the configured one) is asked where
    notebooks answer, to read their kernel activity (unless `activities` gives it per placement);
    `ssh_bytes` (default: signals.ssh_bytes_by_job) tells each job's SSH traffic."""
    now = now or clock.now()
    if activities is None:
        activities = notebook_activities(backend)
    return _check(now, activities, ssh_bytes or signals.ssh_bytes_by_job)


@transaction.atomic
def _check(now: datetime, activities: dict[int, notebooks.Activity | None],
           ssh_bytes: signals.SshBytes = signals.ssh_bytes_by_job) -> IdleCheck:
    result = IdleCheck()
    replicas = list(_running_replicas())
    stats = _stats([r for r in replicas if idle_rule(r.job).by_samples], now)
    ssh = ssh_sent_by_replica(replicas, now, ssh_bytes)
    kept = kept_alive({r.job_id for r in replicas}, now)
    quiet: dict[int, list[signals.Quiet]] = {}
    for replica in replicas:
        if replica.job_id in kept:
            began, verdict = None, False  # its owner keeps it alive until then
        else:
            began, verdict, quiet[replica.pk] = idle_rule(replica.job).judge(
                replica, now, stats.get(replica.pk), activities.get(replica.pk), ssh.get(replica.pk))
        if verdict and replica.idle_since is None:
            replica.idle_since = began or now - window_of(replica, replica.node.pool)   # the rule's start, else the window's
            result.flagged.append(replica)
        elif verdict is False and replica.idle_since is not None:
            replica.idle_since = replica.idle_notified = None
            result.cleared.append(replica)
    Replica.objects.bulk_update(result.flagged + result.cleared, ["idle_since", "idle_notified"])
    by_job: dict[int, list[Replica]] = defaultdict(list)
    for replica in replicas:
        by_job[replica.job_id].append(replica)
    for replicas_of_job in by_job.values():
        job = replicas_of_job[0].job
        new = [r for r in replicas_of_job if r.idle_since is not None and r.idle_notified is None]
        if new:
            _notify(job, new, now, [q for r in new for q in quiet.get(r.pk, [])])
            result.notified.append(job)
        if _due_for_stop(job, replicas_of_job, now):
            try:
                kinds.kind_of(job).end_idle(job, _stop_reason(job, replicas_of_job[0]), stop=_idle_stop,
                                            cancel=stop_job_by_policy)
            except Conflict:  # ended meanwhile
                continue
            result.stopped.append(job)
    if result.flagged or result.stopped:
        log.info("idle GPUs: %d slices flagged, %d cleared, %d jobs stopped", len(result.flagged),
                 len(result.cleared), len(result.stopped))
    return result


def may_stop(job: Job, pool: NodePool) -> bool:
    """Whether the pool's policy stops this job once its grace is over (its kind's idle rule says)."""
    return kinds.kind_of(job).idle_may_stop(pool)


def stop_at(replica: Replica) -> datetime | None:
    """When an idle, notified placement's job is due to be stopped, if its policy stops it (its kind says
    when: a notebook with the notice, or after the grace where the pool notifies first)."""
    pool = replica.node.pool
    if replica.idle_notified is None or not may_stop(replica.job, pool):
        return None
    return kinds.kind_of(replica.job).idle_stop_at(replica.idle_notified, pool)


def _due_for_stop(job: Job, replicas: list[Replica], now: datetime) -> bool:
    """Every running placement of the job idle, notified, and past its grace."""
    due = [stop_at(r) for r in replicas]
    return bool(due) and all(at is not None and at <= now for at in due)


def _stop_reason(job: Job, replica: Replica) -> Said:
    """Why the idle policy stops the job: its server's activity, or its GPUs' use against its pool's policy."""
    return idle_rule(job).stop_reason(job, replica.node.pool)


def _idle_said(job: Job, replicas: list[Replica], stop: datetime | None, now: datetime,
               quiet: list[signals.Quiet] = ()) -> Said:
    """What is idle, which signals were quiet, and what happens next (a job event's reason, rendered in
    its reader's language)."""
    return joined([_idle_what(job, replicas, stop, now), signals.quiet_said(_distinct(quiet))])


def _distinct(quiet) -> list[signals.Quiet]:
    seen: dict[str, signals.Quiet] = {}
    for q in quiet:
        seen.setdefault(q.signal, q)
    return list(seen.values())


def _idle_what(job: Job, replicas: list[Replica], stop: datetime | None, now: datetime) -> Said:
    pool = replicas[0].node.pool
    where = joined([said(texts.IDLE_WHERE, replica=f"{r.role}-{r.index}",
                         node=r.node.name, slice=r.slice_label) for r in replicas], sep=", ")
    figures = {"where": where, "stop": f"{stop:%Y-%m-%d %H:%M %Z}" if stop else "", "pool": pool.name,
               "threshold": pool.idle_threshold_pct, "window": pool.idle_window_min}
    return idle_rule(job).what(job, pool, figures, stop, now)


def _idle_text(job: Job, replicas: list[Replica], stop: datetime | None, now: datetime, quiet=()) -> str:
    """What is idle and what happens next, in the active language."""
    return history_texts.text(_idle_said(job, replicas, stop, now, quiet))


def _idle_notice_texts(job: Job, replicas: list[Replica], stop: datetime | None, now: datetime,
                       quiet=()) -> tuple[str, str]:
    """The idle notice's subject and body in the active language."""
    figures = {"name": job.name, "job": job.pk, "workspace": job.workspace.slug,
               "text": _idle_text(job, replicas, stop, now, quiet)}
    return idle_rule(job).notice_texts(figures)


def _notify(job: Job, replicas: list[Replica], now: datetime, quiet: list[signals.Quiet] = ()) -> None:
    pool = replicas[0].node.pool
    since = min(r.idle_since for r in replicas)
    quiet = _distinct(quiet)
    for r in replicas:
        r.idle_notified = now
    Replica.objects.bulk_update(replicas, ["idle_notified"])
    stop = stop_at(replicas[0])
    names = [q.signal for q in quiet]
    record_event(job, "idle", reason=_idle_said(job, replicas, stop, now, quiet),
                 data={"idle_since": since.isoformat(), "replicas": [r.pk for r in replicas],
                       "stop_at": stop.isoformat() if stop else None, "quiet": names})
    user = job.submitted_by
    if user is not None:
        texts = written_in_english(lambda: _idle_notice_texts(job, replicas, stop, now, quiet))
        notice = Notice(event="idle.notice", workspace=job.workspace, users=(user,), **texts,
                        link=kinds.kind_of(job).page_url(job),
                        data={"job": job.pk, "name": job.name, "idle_since": since.isoformat(),
                              "stop_at": stop.isoformat() if stop else None, "pool": pool.name,
                              "replicas": [f"{r.role}-{r.index}" for r in replicas], "quiet": names})
        transaction.on_commit(lambda: _send(notice))


def _send(notice: Notice) -> None:
    """E-mail and in-app by the submitter's choices, and the workspace's webhook (the portal delivers)."""
    try:
        raise_notice(notice)
    except Exception:  # a mail server away must not undo the flag nor stop the next check
        log.exception("idle notice %r could not be sent", notice.subject)


class ByUtilisation:
    """The idle rule of jobs judged by their GPUs' use: idle once the agents' samples stay below the pool's
    threshold for its window (an open SSH session's traffic counts as activity)."""

    by_samples = True   # judged on the agents' utilisation samples (`_stats`)

    def window(self, replica: Replica) -> timedelta:
        return window_of(replica, replica.node.pool)

    def judge(self, replica: Replica, now: datetime, stats: dict | None, activity: notebooks.Activity | None,
              ssh_sent: int | None) -> tuple[datetime | None, bool | None, list[signals.Quiet]]:
        """(when its idle spell began, None: the window's start; its verdict as `judge`; the quiet signals)."""
        verdict = judge(replica, stats, now)
        if ssh_sent is None:
            return None, verdict, []
        verdict, quiet = judge_ssh_job(replica, verdict, ssh_sent)
        return None, verdict, quiet

    def stop_reason(self, job: Job, pool: NodePool) -> Said:
        return said(texts.SLICE_IDLE_STOP_REASON, threshold=pool.idle_threshold_pct,
                    window=pool.idle_window_min, grace=pool.idle_grace_min, pool=pool.name)

    def what(self, job: Job, pool: NodePool, figures: dict, stop: datetime | None, now: datetime) -> Said:
        return said(texts.SLICE_IDLE_NOTICE if stop is not None else texts.SLICE_IDLE, **figures)

    def notice_texts(self, figures: dict) -> tuple[str, str]:
        return (gettext("%(name)s (#%(job)s) holds idle GPUs") % figures,
                gettext("Your job %(name)s (#%(job)s) in workspace %(workspace)s holds GPUs it does not use.") % figures
                + "\n" + gettext("%(text)s.") % figures + "\n"
                + gettext("Stop the job if it is done, or put its GPUs to work.") + "\n")


class ByActivity:
    """The idle rule of notebooks: idle once no kernel ran and neither the GPU nor the CPU was used (nor SSH
    traffic sent) for the spec's idleAfter, as the notebook's server tells (`judge_notebook`)."""

    by_samples = False

    def window(self, replica: Replica) -> timedelta:
        return notebook_wait(replica)

    def judge(self, replica: Replica, now: datetime, stats: dict | None, activity: notebooks.Activity | None,
              ssh_sent: int | None) -> tuple[datetime | None, bool | None, list[signals.Quiet]]:
        began, quiet = judge_notebook(replica, now, activity, ssh_sent)
        return (began if isinstance(began, datetime) else None), (None if began is None else bool(began)), quiet

    def stop_reason(self, job: Job, pool: NodePool) -> Said:
        return said(texts.NOTEBOOK_IDLE_STOP_REASON, minutes=self._minutes(job, pool))

    def what(self, job: Job, pool: NodePool, figures: dict, stop: datetime | None, now: datetime) -> Said:
        figures = {**figures, "minutes": self._minutes(job, pool)}
        return said(texts.NOTEBOOK_IDLE_STOPPED if stop <= now else texts.NOTEBOOK_IDLE_NOTICE, **figures)

    def notice_texts(self, figures: dict) -> tuple[str, str]:
        return (gettext("notebook %(name)s (#%(job)s) is idle") % figures,
                gettext("Your notebook %(name)s (#%(job)s) in workspace %(workspace)s:") % figures + "\n"
                + gettext("%(text)s.") % figures + "\n")

    @staticmethod
    def _minutes(job: Job, pool: NodePool) -> int:
        return -(-notebooks.idle_after_s(job, pool.idle_window_min) // 60)


BY_UTILISATION, BY_ACTIVITY = ByUtilisation(), ByActivity()


def idle_rule(job: Job) -> ByUtilisation | ByActivity:
    """The idle rule the job's kind follows."""
    return kinds.kind_of(job).idle_rule(BY_UTILISATION, BY_ACTIVITY)
