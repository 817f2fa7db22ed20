"""The scheduler and the cluster: the backend, cycle and service intervals, fair share, the
simulated cluster, job logs, node health and the console's queue history."""

import os
from pathlib import Path

from portal.settings.env import VAR_DIR, env_bool

SCHEDULER_BACKEND = os.environ.get("SCHEDULER_BACKEND", "simulated")  # simulated | kubernetes
SCHEDULER_INTERVAL_S = float(os.environ.get("SCHEDULER_INTERVAL_S", "2"))
# Inference services: how often the autoscaler scrapes and sizes each one (at most once a cycle), how
# long the endpoint holds a request while a service starts from zero, and how long a simulated
# replica takes to load its model.
SERVICE_SCALE_INTERVAL_S = float(os.environ.get("SERVICE_SCALE_INTERVAL_S", "5"))
SERVE_COLD_START_TIMEOUT_S = float(os.environ.get("SERVE_COLD_START_TIMEOUT_S", "120"))
# At its max replicas a service is sent at most SERVE_REPLICA_CONCURRENCY requests at once per running replica
# (its server's batch: vLLM's --max-num-seqs); the rest wait in the portal, fairly across callers, up to
# SERVE_QUEUE_MAX, then 429.
SERVE_REPLICA_CONCURRENCY = int(os.environ.get("SERVE_REPLICA_CONCURRENCY", "8"))
SERVE_QUEUE_MAX = int(os.environ.get("SERVE_QUEUE_MAX", "100"))
SIM_INFERENCE_STARTUP_S = float(os.environ.get("SIM_INFERENCE_STARTUP_S", "2"))
# Time-based fair share (scheduling/cycle/usage.py): past usage over the window, halved every
# half-life, shifts over-quota weights by K; a half-life of 0 turns it off.
FAIR_SHARE_HALF_LIFE_H = float(os.environ.get("FAIR_SHARE_HALF_LIFE_H", "0"))
FAIR_SHARE_WINDOW_DAYS = float(os.environ.get("FAIR_SHARE_WINDOW_DAYS", "7"))
FAIR_SHARE_USAGE_K = float(os.environ.get("FAIR_SHARE_USAGE_K", "1"))
# Backfill reservations (scheduling/core/actions/reserve.py): a whole-GPU gang pending longer than this many
# minutes gets nodes held for it, so smaller later jobs stop starting first; "off" (or 0) turns them off.
BACKFILL_PATIENCE = os.environ.get("BACKFILL_PATIENCE", "30")
BACKFILL_PATIENCE_S = (None if BACKFILL_PATIENCE.strip().lower() in ("off", "0", "")
                       else float(BACKFILL_PATIENCE) * 60)
SIM_SPEEDUP = float(os.environ.get("SIM_SPEEDUP", "60"))  # a 1 h job runs 1 min on the simulated cluster
SIM_FAILURE_RATE = float(os.environ.get("SIM_FAILURE_RATE", "0.05"))
# The simulated cluster's real processes (notebook servers): one folder per replica with its pid, URL and log;
# notebooks' home folders per workspace and name, kept across stop and start. Tests set folders of their own.
SIM_RUNTIME_DIR = Path(os.environ.get("SIM_RUNTIME_DIR") or VAR_DIR / "sim-runtime")
NOTEBOOK_HOME_DIR = Path(os.environ.get("NOTEBOOK_HOME_DIR") or VAR_DIR / "notebooks")
# Training replicas run a small process each (it logs its wiring, lives for the replica's run): off with 0
# (the benchmarks and most tests). At most SIM_MAX_PROCESSES simulated processes of any kind run at once;
# past it a training replica runs without one (notebooks and services always get theirs).
SIM_TRAINING_PROCESSES = env_bool("SIM_TRAINING_PROCESSES", True)
SIM_MAX_PROCESSES = int(os.environ.get("SIM_MAX_PROCESSES", "64"))
# Workspace volumes and dataset versions on the simulated cluster: <workspace>/<name> and <workspace>/<name>/v<N>
VOLUMES_DIR = Path(os.environ.get("VOLUMES_DIR") or VAR_DIR / "volumes")
DATASETS_DIR = Path(os.environ.get("DATASETS_DIR") or VAR_DIR / "datasets")
VOLUME_UPLOAD_MAX_BYTES = int(os.environ.get("VOLUME_UPLOAD_MAX_BYTES", str(100 * 1024 * 1024)))
# Replica logs (scheduling.logs): kept this long after the replica ended, at most this much per job
JOB_LOG_RETENTION_DAYS = int(os.environ.get("JOB_LOG_RETENTION_DAYS", "30"))
JOB_LOG_MAX_BYTES = int(os.environ.get("JOB_LOG_MAX_BYTES", str(2 * 1024 * 1024)))
JOB_LOG_TAIL_LINES = int(os.environ.get("JOB_LOG_TAIL_LINES", "5000"))  # lines read from the backend per replica
JOB_LOG_POLL_SECONDS = float(os.environ.get("JOB_LOG_POLL_SECONDS", "2"))  # follow=1: how often new lines are read
JOB_LOG_FOLLOW_SECONDS = float(os.environ.get("JOB_LOG_FOLLOW_SECONDS", "900"))  # follow=1: longest stream
# Node health: a node whose agent reported once and then stays silent this long is NotReady (its work evicted)
NODE_NOT_READY_AFTER_S = float(os.environ.get("NODE_NOT_READY_AFTER_S", "60"))
IDLE_CHECK_INTERVAL_S = float(os.environ.get("IDLE_CHECK_INTERVAL_S", "60"))  # how often idle GPU slices are looked for
# Idle rules for notebooks and jobs with an open SSH session: SSH bytes (in + out) per idle window, and the CPU
# use (percent of one core) at or below which each signal counts as quiet
IDLE_SSH_BYTES = int(os.environ.get("IDLE_SSH_BYTES", "4096"))
IDLE_CPU_PCT = float(os.environ.get("IDLE_CPU_PCT", "5"))
# The console's per-queue allocation history: one sample per queue this often, kept this long
QUEUE_HISTORY_INTERVAL_S = float(os.environ.get("QUEUE_HISTORY_INTERVAL_S", "300"))
# How often pending jobs without a kept first expected start get one (scheduling/forecast.py
# `keep_first_forecasts`): what the forecast's calibration later sets against their real starts.
FIRST_FORECAST_INTERVAL_S = float(os.environ.get("FIRST_FORECAST_INTERVAL_S", "30"))
QUEUE_HISTORY_RETENTION_DAYS = int(os.environ.get("QUEUE_HISTORY_RETENTION_DAYS", "30"))
# Deadline work (scheduling.deadlines): a deadline job's latest start keeps this share of its run time in hand,
# widened by its queue's measured run-time spread (scheduling.forecast.runtime_factors)
DEADLINE_SAFETY_MARGIN = float(os.environ.get("DEADLINE_SAFETY_MARGIN", "0.10"))
