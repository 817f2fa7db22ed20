"""The simulated cluster: the database's nodes, replicas that really run for their duration.

A launched replica is Pending for a moment (image pull), then Running until its job's expected
duration (divided by SIM_SPEEDUP) has passed since the job's first replica started, then
Succeeded, or Failed for a share SIM_FAILURE_RATE of jobs (decided by a hash, so reruns agree).
A node that is not ready has lost its pods: they are no longer reported.

A notebook replica is a real local process (`notebook_server`, started through `processes.py` under
SIM_RUNTIME_DIR): Pending until it says it listens, Running while it lives, Failed if it exits on its own;
evicting or forgetting the replica stops it. Its home is its home volume's folder
(VOLUMES_DIR/<workspace>/home-<name>, scheduling.storage), kept across stops and starts until the volume is
deleted.

A training replica keeps the timing above and, unless SIM_TRAINING_PROCESSES is off, also runs a small
process (`training_process`) for as long as it runs: started with the replica's environment alone (the
spec's `env` and the platform's variables) and its mounts, it logs their names, sleeps for the replica's
run and exits 0. Its log is part of the replica's. A process that ends before its replica (killed, crashed)
fails the replica; evicting or forgetting the replica stops it: SIGTERM, the job's terminationGracePeriod (in
simulated time), then SIGKILL. A resumable job's process saves its step to its checkpoint volume on SIGTERM and
every checkpoint.every, resumes from it when launched again, and its replica runs only what is left. At most SIM_MAX_PROCESSES processes of any
kind run at once: past it a training replica runs without one and its log says so. The cycle does not
wait for these starts: a background thread (`processes.STARTS`) makes them.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Min

from scheduling import clock, storage
from scheduling.backends import ssh_endpoint
from scheduling.backends.base import (
    BATCH,
    FAILED,
    JUPYTER,
    MODEL_SERVER,
    PENDING,
    RUNNING,
    SUCCEEDED,
    Endpoint,
    GpuInventory,
    NodeInventory,
    ReplicaKey,
    ReplicaLaunch,
    ReplicaStatus,
    SshEndpoint,
)
from scheduling.backends.simulated import mounts, processes, training_process
from scheduling.backends.simulated.processes import STARTS, ProcessRuntime
from scheduling.bulk import insert_rows
from scheduling.models import Gpu, Node, NodePool, SimulatedPod
from scheduling.ssh import ssh_token


class PodRow(NamedTuple):
    """The columns of a SimulatedPod that its status needs."""

    job_id: int
    role: str
    index: int
    node: str
    launched: datetime
    job_started: datetime
    run_seconds: float
    fails: bool
    kind: str
    process: bool
    exit_code: int
    fail_after_s: float | None


PULL_SECONDS = 1.0
NOTEBOOK_SERVER = "scheduling.backends.simulated.notebook_server"
TENSORBOARD_PROCESS = "scheduling.backends.simulated.tensorboard_process"
TENSORBOARD_ROLE = "_tensorboard"  # its process's key: (job, this, 0); no role is named so (not a DNS label)
INFERENCE_SERVER = "scheduling.backends.simulated.inference_server"
TRAINING_PROCESS = str(Path(training_process.__file__).resolve())  # run as a script: no project imports
SLICE_MODES = {"whole": "exclusive", "fraction": "fraction", "mig": "mig", "timeslice": "timeslice"}


def _gpu_share(replica: ReplicaLaunch) -> float:
    """The GPUs the replica's slice amounts to (what the simulated server says it runs on)."""
    s = replica.slice or {}
    if s.get("kind") == "fraction":
        return max(0.001, int(s.get("gpu_milli") or 0) / 1000)
    if s.get("kind") == "mig" and str(s.get("mig_profile") or "")[:1].isdigit():
        return int(str(s["mig_profile"])[0]) / 7
    return float(max(1, len(replica.gpus)))


def replica_environment(replica: ReplicaLaunch) -> dict[str, str]:
    """The environment a training replica's process gets: the spec's `env` and, as on Kubernetes, the
    platform's variables for its rank and GPUs (these win over the spec's)."""
    own = {"WORLD_SIZE": str(replica.world_size), "RANK": str(replica.rank)}
    if replica.gpus:
        uuids = list(replica.gpu_uuids) + [""] * (len(replica.gpus) - len(replica.gpu_uuids))
        own["NVIDIA_VISIBLE_DEVICES"] = ",".join(u or str(i) for u, i in zip(uuids, replica.gpus, strict=True))
    return {**dict(replica.env), **own}
def _mounts_env(replica: ReplicaLaunch) -> dict[str, str]:
    """Where the replica's process finds its volumes and datasets (simulated/mounts.py reads it)."""
    return {mounts.ENV: json.dumps(storage.host_mapping(replica.mounts))} if replica.mounts else {}


def _fails(job_id: int, rate: float) -> bool:
    digest = hashlib.sha256(f"sim-failure:{job_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < rate


def secret_env(replica: ReplicaLaunch) -> dict[str, str]:
    """The variables a replica takes from the workspace's secrets (a process's environment, as a pod's)."""
    return {var: replica.secret_values[name] for var, name in replica.secret_env if name in replica.secret_values}


def ssh_wiring(replica: ReplicaLaunch, job_env: Mapping[str, str], workdir: str) -> dict[str, str]:
    """What the replica's SSH server (ssh_endpoint.py) needs: its token, the shell's working directory, the
    names of the job's own variables (the shell gets these, never the rest of this worker's environment) and
    the slice sim-smi shows."""
    s = replica.slice or {}
    wiring = {ssh_endpoint.TOKEN_ENV: ssh_token(replica.job_id), ssh_endpoint.JOB_ENV: ",".join(sorted(job_env)),
              ssh_endpoint.SHARE_ENV: f"{_gpu_share(replica):g}"}
    if workdir:
        wiring[ssh_endpoint.WORKDIR_ENV] = workdir
    if s.get("gpu_mem_mib"):
        wiring[ssh_endpoint.MEMORY_ENV] = str(int(s["gpu_mem_mib"]))
    return wiring


def training_workdir(replica: ReplicaLaunch, mapped: Mapping[str, str], own: Path) -> str:
    """Where a training replica's SSH shell starts: the folder of the first volume it mounts writable (volumes
    are path mappings here, so the folder on this machine), else `own`, a folder of the replica's."""
    for mount in replica.mounts:
        if mount.writable and mount.mount_path in mapped:
            return mapped[mount.mount_path]
    own.mkdir(parents=True, exist_ok=True)
    return str(own)


def secret_files(replica: ReplicaLaunch) -> dict[str, str]:
    """The secret files a replica mounts: <mountPath>/<secret name> -> the value."""
    return {f"{path.rstrip('/')}/{name}": replica.secret_values[name] for name, path in replica.secret_mounts
            if name in replica.secret_values}


class SimulatedBackend:
    name = "simulated"

    def __init__(self, *, speedup: float | None = None, failure_rate: float | None = None, clock=clock.now,
                 runtime: ProcessRuntime | None = None,
                 server_startup_s: float | None = None, training_processes: bool | None = None,
                 max_processes: int | None = None):
        self.speedup = speedup if speedup is not None else settings.SIM_SPEEDUP
        self.failure_rate = failure_rate if failure_rate is not None else settings.SIM_FAILURE_RATE
        self.clock = clock
        self.clock_scale = self.speedup  # billing charges simulated time, as the tenant was quoted
        self.runtime = runtime or ProcessRuntime(settings.SIM_RUNTIME_DIR)
        self.server_startup_s = (server_startup_s if server_startup_s is not None
                                 else settings.SIM_INFERENCE_STARTUP_S)
        self.training_processes = (training_processes if training_processes is not None
                                   else settings.SIM_TRAINING_PROCESSES)
        self.max_processes = max_processes if max_processes is not None else settings.SIM_MAX_PROCESSES

    def inventory(self) -> list[NodeInventory]:
        # rows, not model instances: read every cycle, for thousands of GPUs
        pools = {p.pk: p for p in NodePool.objects.all()}
        gpus: dict[int, list] = defaultdict(list)
        for node_id, index, uuid, memory in Gpu.objects.order_by("node_id", "index").values_list(
                "node_id", "index", "uuid", "memory_mib"):
            gpus[node_id].append((index, uuid, memory))
        result = []
        for pk, name, pool_id, cpu, memory, ready, cordoned in Node.objects.order_by("pk").values_list(
                "pk", "name", "pool_id", "cpu_milli", "memory_mib", "ready", "cordoned"):
            pool = pools[pool_id]
            mig = tuple(pool.mig_layout or ())
            result.append(NodeInventory(
                name=name, pool=pool.name, vendor=pool.vendor, gpu_model=pool.gpu_model,
                gpus=tuple(GpuInventory(index, uuid, gpu_memory, mig) for index, uuid, gpu_memory in gpus[pk]),
                cpu_milli=cpu, memory_mib=memory, ready=ready, cordoned=cordoned, spot=pool.spot,
                timeslice_replicas=pool.timeslice_replicas if pool.sharing == "timeslice" else 0))
        return result

    def sync_workspace(self, workspace: str, gpu_quota_milli: int | None) -> None:
        return None  # nothing to create: the simulated cluster has no namespaces

    def launch(self, replica: ReplicaLaunch) -> None:
        self.launch_many([replica])

    def launch_many(self, replicas: list[ReplicaLaunch]) -> None:
        """Start replicas; one that already runs is left as it is (launch is idempotent)."""
        now = self.clock()
        job_ids = {r.job_id for r in replicas}
        with transaction.atomic():
            first = dict(SimulatedPod.objects.filter(job_id__in=job_ids).values("job_id")
                         .annotate(first=Min("job_started")).values_list("job_id", "first"))
            pods = []
            for r in replicas:
                code, fail_after = self._simulated_failure(r)
                pods.append(SimulatedPod(
                    job_id=r.job_id, role=r.role, index=r.index, node=r.node, image=r.image, gpus=list(r.gpus),
                    launched=now, job_started=first.get(r.job_id) or now, run_seconds=max(0, r.expected_duration_s - self.resumed_step(r)) / self.speedup,
                    fails=(bool(code) or _fails(r.job_id, self.failure_rate)) and r.shape == BATCH,
                    exit_code=code or 1, fail_after_s=fail_after, kind=r.kind, process=r.shape != BATCH))
            insert_rows(pods, ignore_conflicts=True)
        for replica in replicas:  # once the pods are recorded: a process is never left without its pod
            if replica.shape == JUPYTER:
                self._start_notebook(replica)
            elif replica.shape == MODEL_SERVER:
                self._start_server(replica)
            if replica.tensorboard_logdir:
                self._start_tensorboard(replica)
        training = [r for r in replicas if r.shape == BATCH] if self.training_processes else []
        if training:
            self._start_training_many(training, now)

    def _simulated_failure(self, replica: ReplicaLaunch) -> tuple[int, float | None]:
        """The exit code its spec's SIM_EXIT_CODE gives this placement (0: none) and, with SIM_FAIL_AFTER, the
        real seconds after its start at which it fails (simulated time divided by the speed-up)."""
        env = dict(replica.env)
        code = training_process.simulated_exit_code(env, replica.attempt)
        after = training_process.simulated_fail_after(env)
        return code, (after / self.speedup if code and after is not None else None)

    # -- training: a process that lives as long as the replica runs ---------------------------------
    def _start_training_many(self, replicas: list[ReplicaLaunch], now: datetime) -> None:
        """Hand the replicas' process starts to the background starter (the cycle does not wait for them):
        each runs until its pod's simulated end, counted from now on the wall clock."""
        ends = {(job_id, role, index): job_started + timedelta(seconds=run_seconds + PULL_SECONDS)
                for job_id, role, index, job_started, run_seconds in SimulatedPod.objects.filter(
                    job_id__in={r.job_id for r in replicas}).values_list(
                    "job_id", "role", "index", "job_started", "run_seconds")}
        wall = time.time()
        batch = [(replica, *self.training_wiring(replica), wall + (ends[replica.key] - now).total_seconds())
                 for replica in replicas if replica.key in ends]  # a pod deleted meanwhile gets no process
        if batch:
            STARTS.submit(lambda: self._start_training_batch(batch))

    def training_wiring(self, replica: ReplicaLaunch) -> tuple[dict[str, str], dict[str, str]]:
        """The environment and the mounts ({path in the replica: path on this machine}) of a training
        replica's process. Called in the cycle's thread, so it may read the database; volumes and secret
        files add their paths (and secrets their variables) here."""
        return {**secret_env(replica), **replica_environment(replica)}, storage.host_mapping(replica.mounts)

    def _start_training_batch(self, batch: list[tuple[ReplicaLaunch, dict, dict, float]]) -> None:
        """In the starter's thread (no database): a process per replica while fewer than max_processes
        run (notebooks and servers count, and always start); a replica past the cap runs without one,
        and its log says so."""
        running = self.runtime.running()
        for replica, env, mapped, ends_at in sorted(batch, key=lambda item: item[0].key):  # older jobs first
            key = replica.key
            if self.runtime.has(key):
                continue  # it has its process (launch is idempotent)
            if running >= self.max_processes:
                self.runtime.note(key, f"{replica.role}-{replica.index}: no process: {running} simulated processes "
                                       f"run already, the most SIM_MAX_PROCESSES allows; this replica runs without one")
                continue
            try:
                started = self.start_training_process(replica, env=env, mounts=mapped,
                                                       run_s=max(0.0, ends_at - time.time()))
            except OSError as error:  # no more processes or files: the replica runs on without one
                self.runtime.note(key, f"{replica.role}-{replica.index}: no process: it could not start: {error}")
                continue
            running += started

    def wait_for_starts(self, timeout: float = 30.0) -> bool:
        """Until the process starts handed over so far are done (tests)."""
        return STARTS.wait(timeout)

    def start_training_process(self, replica: ReplicaLaunch, *, env: Mapping[str, str], mounts: Mapping[str, str],
                               run_s: float) -> bool:
        """Start the training replica's process with exactly `env` (nothing of this worker's environment)
        and `mounts` ({path in the replica: path on this machine}, passed as JSON in SIM_MOUNTS when there
        are any), for `run_s` seconds. Returns whether it started one now."""
        environment, files = dict(env), secret_files(replica)
        if replica.ssh:   # its SSH server: the process starts it as a child and passes it this wiring
            workdir = training_workdir(replica, mounts, self.runtime.folder(replica.key) / "work")
            environment[training_process.SSH_VARIABLE] = json.dumps(ssh_wiring(replica, env, workdir))
        root = self.runtime.folder(replica.key) / processes.ROOT
        # the secrets' files are written under the replica's root (runtime.start); each mountPath is a mount
        mounts = {**{path: str(root / path.lstrip("/")) for _name, path in replica.secret_mounts}, **mounts}
        if mounts:
            environment[training_process.MOUNTS_VARIABLE] = json.dumps(dict(mounts), sort_keys=True)
        argv = [sys.executable, "-I", "-S", TRAINING_PROCESS, "--seconds", f"{run_s:.3f}",
                "--name", f"{replica.role}-{replica.index}", "--attempt", str(replica.attempt),
                "--speedup", f"{self.speedup:g}"]
        if replica.resumable:   # it saves its step to its checkpoint volume, and resumes from it
            argv += ["--checkpoint", replica.checkpoint_path, "--checkpoint-every", str(replica.checkpoint_every_s)]
        return self.runtime.start(replica.key, argv, env=environment, files=files, inherit_environment=False,
                                  grace_s=replica.termination_grace_s / self.speedup)

    def resumed_step(self, replica: ReplicaLaunch) -> int:
        """The step a resumable training replica saved last (its simulated seconds of work done), 0 for any
        other: it runs only what is left of its duration."""
        if not (replica.resumable and self.training_processes):   # only training takes a checkpoint
            return 0
        folder = storage.host_mapping(replica.mounts).get(posixpath.normpath(replica.checkpoint_path))
        return training_process.read_step(folder, f"{replica.role}-{replica.index}") if folder else 0

    def _training_process_ended(self, key: ReplicaKey) -> tuple[str, int | None] | None:
        """Why the training replica's process ended before its replica did and its exit code, or None while
        it runs (or once it completed)."""
        info = self.runtime.find(key)
        if info is None or info.alive:
            return None
        last = self.runtime.log_tail(key, 1).strip()
        if last == training_process.COMPLETED:
            return None
        if info.exit_code is not None and info.exit_code < 0:
            return f"the training process was killed by signal {-info.exit_code}", None
        if info.exit_code is not None:
            return f"the training process exited with code {info.exit_code}: {last}"[:500], info.exit_code
        return "the training process ended before its replica", None

    # -- notebooks: real processes -----------------------------------------------------------------
    def home_of(self, workspace: str, name: str) -> Path:
        """The folder of the notebook's home volume."""
        return storage.volume_dir(workspace, storage.home_volume_name(name))

    def _start_notebook(self, replica: ReplicaLaunch) -> None:
        argv = [sys.executable, "-m", NOTEBOOK_SERVER, "--base-url", replica.base_url or "/",
                "--gpu", f"{_gpu_share(replica):g}", "--title", replica.job_name]
        if replica.home is not None:
            home = replica.home.host_path()
            home.mkdir(parents=True, exist_ok=True)
            argv += ["--home", str(home)]
        own = {"JUPYTER_TOKEN": replica.token} if replica.token else {}
        job_env = {**dict(replica.env), **secret_env(replica), **own, **_mounts_env(replica)}
        workdir = str(home) if replica.home is not None else ""
        wiring = ssh_wiring(replica, job_env, workdir) if replica.ssh else {}
        self.runtime.start(replica.key, argv, env={**job_env, **wiring}, token=replica.token,
                           files=secret_files(replica))

    def _start_server(self, replica: ReplicaLaunch) -> None:
        """An inference replica: the OpenAI-compatible server, as fast as the slice it was given, that
        takes `startup_s` to "load" its model (its /health answers 503 until then)."""
        s = replica.slice or {}
        argv = [sys.executable, "-m", INFERENCE_SERVER, "--model", replica.model_name or replica.job_name,
                "--mode", SLICE_MODES.get(s.get("kind", "whole"), "exclusive"), "--num-gpus", str(len(replica.gpus)),
                "--gpu-milli", str(int(s.get("gpu_milli") or 1000)), "--startup-s", f"{self.server_startup_s:g}"]
        if s.get("kind") == "mig":
            argv += ["--mig", str(s.get("mig_profile") or "")]
        if replica.token:
            argv += ["--api-key", replica.token]
        self.runtime.start(replica.key, argv, env={**secret_env(replica), **_mounts_env(replica)},
                           token=replica.token, files=secret_files(replica), drains=True)

    def endpoint(self, key: ReplicaKey, *, workspace: str = "", base_url: str = "") -> Endpoint | None:
        return self.runtime.endpoint(key)  # the process said where it listens (under its base URL)

    # -- TensorBoard: a real process beside a job's first replica, as long as the job has pods ----------
    def tensorboard_logs(self, replica: ReplicaLaunch) -> Path:
        """The folder on this machine that the replica's logdir is: under its mounted volume when one holds
        it, else a folder of the job's own under the runtime root (kept until the job's TensorBoard stops)."""
        found = mounts.local_path(replica.tensorboard_logdir, storage.host_mapping(replica.mounts))
        return found or self.runtime.folder(self.tensorboard_key(replica.job_id)) / "logdir"

    @staticmethod
    def tensorboard_key(job_id: int) -> ReplicaKey:
        return (job_id, TENSORBOARD_ROLE, 0)

    def _start_tensorboard(self, replica: ReplicaLaunch) -> None:
        """TensorBoard on a free loopback port (it binds port 0 and prints the one it got: the process's
        record keeps it), serving at / of its own host on the notebook origin."""
        argv = [sys.executable, "-m", TENSORBOARD_PROCESS, "--logdir", str(self.tensorboard_logs(replica))]
        self.runtime.start(self.tensorboard_key(replica.job_id), argv)

    def tensorboard_endpoint(self, job_id: int, workspace: str = "") -> Endpoint | None:
        return self.runtime.endpoint(self.tensorboard_key(job_id))

    def ssh_endpoint(self, key: ReplicaKey, *, workspace: str = "") -> SshEndpoint | None:
        return self.runtime.ssh_endpoint(key)  # the process said on which port its SSH server listens

    def delete_home(self, workspace: str, name: str) -> None:
        shutil.rmtree(self.home_of(workspace, name), ignore_errors=True)

    def evict(self, key: ReplicaKey, reason: str) -> None:
        self.release_many([(key, reason)])

    def release_many(self, releases: list[tuple[ReplicaKey, str | None]]) -> None:
        """Evict or forget many pods in one delete (a cycle ends a hundred at a time on a busy cluster)."""
        keys = {key for key, _ in releases}
        pks = [pk for pk, *key in SimulatedPod.objects.filter(job_id__in={k[0] for k in keys}).values_list(
            "pk", "job_id", "role", "index") if tuple(key) in keys]
        SimulatedPod.objects.filter(pk__in=pks).delete()
        for key in keys:
            self.runtime.stop(key)
        jobs = {job_id for job_id, _role, _index in keys}
        remaining = set(SimulatedPod.objects.filter(job_id__in=jobs).values_list("job_id", flat=True).distinct())
        for job_id in jobs - remaining:  # the job's last pod went: its TensorBoard goes with it
            self.runtime.stop(self.tensorboard_key(job_id))

    def forget(self, key: ReplicaKey) -> None:
        self.evict(key, "finished")

    @staticmethod
    def _instants(pod: SimulatedPod | PodRow) -> tuple[datetime, datetime]:
        """When the pod starts running and when it ends."""
        started = pod.launched + timedelta(seconds=PULL_SECONDS)
        return started, max(pod.job_started + timedelta(seconds=pod.run_seconds + PULL_SECONDS), started)

    def next_change(self, after: datetime) -> datetime | None:
        """The first instant after `after` at which a pod starts or ends, for a caller that moves the
        clock from event to event rather than by a fixed step (the demo history)."""
        pods = SimulatedPod.objects.filter(process=False).only("launched", "job_started", "run_seconds")
        return min((at for pod in pods for at in self._instants(pod) if at > after), default=None)

    def _phase(self, pod: SimulatedPod | PodRow, now: datetime) -> tuple[str, float | None, float | None]:
        started, ends = self._instants(pod)
        if pod.fails and pod.fail_after_s is not None:  # SIM_FAIL_AFTER: it fails that long after it started
            ends = min(ends, started + timedelta(seconds=pod.fail_after_s))
        if now < started:
            return PENDING, None, None
        if now < ends:
            return RUNNING, started.timestamp(), None
        return (FAILED if pod.fails else SUCCEEDED), started.timestamp(), ends.timestamp()

    def _process_phase(self, pod: SimulatedPod | PodRow, now: datetime) -> tuple[str, float | None, float | None, str]:
        """A process pod: Pending until its server listens, Running while it lives, Failed once it exited."""
        info = self.runtime.find((pod.job_id, pod.role, pod.index))
        launched = pod.launched.timestamp()  # the platform's clock, as billing counts the placement
        if info is not None and info.alive:
            return (RUNNING, launched, None, "") if info.url else (PENDING, None, None, "")
        said = self.runtime.log_tail((pod.job_id, pod.role, pod.index), 1).strip()
        code = f" with code {info.exit_code}" if info is not None and info.exit_code is not None else ""
        why = f"the {pod.kind} server exited{code}" if info is not None else f"the {pod.kind} server is gone"
        return FAILED, launched, now.timestamp(), (why + (f": {said}" if said else ""))[:500]

    def statuses(self) -> list[ReplicaStatus]:
        now = self.clock()
        ready = set(Node.objects.filter(ready=True).values_list("name", flat=True))
        result = []
        # rows, not model instances: every pod is read every cycle
        pods = [PodRow(*row) for row in SimulatedPod.objects.order_by("job_id", "role", "index").values_list(
            *PodRow._fields)]
        held = {(pod.job_id, pod.role, pod.index) for pod in pods}
        recorded = set(self.runtime.keys())
        jobs_with_pods = {pod.job_id for pod in pods}
        for key in recorded - held:  # its pod was dropped (a launch rolled back, a worker killed mid-evict)
            if key[1] != TENSORBOARD_ROLE or key[0] not in jobs_with_pods:  # a TensorBoard lives with its job
                self.runtime.stop(key)
        for pod in pods:
            key = (pod.job_id, pod.role, pod.index)
            if pod.node not in ready:
                if key in recorded:
                    self.runtime.stop(key)  # the node's processes went with it
                continue  # the node is gone and its pods with it
            if pod.process:
                phase, started, finished, message = self._process_phase(pod, now)
                result.append(ReplicaStatus(pod.job_id, pod.role, pod.index, phase, pod.node, message, started,
                                            finished))
                continue
            phase, started, finished = self._phase(pod, now)
            message = "simulated failure: CUDA error: an illegal memory access" if phase == FAILED else ""
            code = pod.exit_code if phase == FAILED else None
            if key in recorded and phase in (PENDING, RUNNING) and (ended := self._training_process_ended(key)):
                phase, started, finished = FAILED, started or pod.launched.timestamp(), now.timestamp()
                message, code = ended
            result.append(ReplicaStatus(pod.job_id, pod.role, pod.index, phase, pod.node, message, started, finished,
                                        exit_code=code))
        return result

    def logs(self, key: ReplicaKey, tail_lines: int = 200) -> str:
        return self.logs_many([key], tail_lines).get(key, "")

    def logs_many(self, keys: list[ReplicaKey], tail_lines: int = 200) -> dict[ReplicaKey, str]:
        """The logs of many pods, read in one query; a key without a pod has none."""
        wanted = set(keys)
        return {key: self._pod_log(pod, key, tail_lines)
                for pod in SimulatedPod.objects.filter(job_id__in={k[0] for k in wanted})
                if (key := (pod.job_id, pod.role, pod.index)) in wanted}

    def _pod_log(self, pod: SimulatedPod, key: ReplicaKey, tail_lines: int) -> str:
        role, index = key[1], key[2]
        if pod.process:
            return (f"{pod.launched:%H:%M:%S} {pod.kind} {role}-{index} started on {pod.node}, GPUs {pod.gpus}\n"
                    + self.runtime.log_tail(key, max(0, tail_lines - 1)))[-1024 * 1024:]
        now = self.clock()
        phase, _, _ = self._phase(pod, now)
        lines = [f"{pod.launched:%H:%M:%S} pulling image {pod.image}",
                 f"{pod.launched:%H:%M:%S} scheduled on {pod.node}, GPUs {pod.gpus}"]
        if self.training_processes:  # what its process said, or why it has none
            lines += self.runtime.log_tail(key, max(0, tail_lines)).splitlines()
        total = max(pod.run_seconds, 1e-6)
        elapsed = min(max((now - pod.job_started).total_seconds(), 0.0), total)
        steps = int(10 * elapsed / total)
        for step in range(1, steps + 1):
            at = pod.job_started + timedelta(seconds=total * step / 10)
            lines.append(f"{at:%H:%M:%S} {role}-{index}: step {step * 100}/1000 loss {2.0 / (1 + step):.4f}")
        if phase == SUCCEEDED:
            lines.append("training finished, checkpoint saved")
        elif phase == FAILED:
            lines.append("RuntimeError: CUDA error: an illegal memory access was encountered (simulated)")
        return "".join(line + "\n" for line in lines[-tail_lines:])  # as a container writes them
