"""The scheduling layer's public face: what billing and portal may import from scheduling.

Besides this module they may import only ``scheduling.models`` (the tables), ``scheduling.kinds`` (the
workload kinds' registry) and ``scheduling.forms``; an import-linter contract in pyproject.toml keeps it
so. A name a caller needs goes into the group of its concept below. Offered whole as well, for callers
that write ``services.cancel_job(...)``: ``clock`` (tests set its time), ``services``, ``selectors``,
``logs``, ``notebooks``, ``inference``, ``service_usage``, ``service_revisions``, ``history_texts``,
``metrics`` and ``signals``.
"""
# The groups below are by concept, not alphabetical:
# isort: skip_file

# ------------------------------------------------------------ Time and errors
from scheduling import clock
from scheduling.errors import Conflict, DomainError, Forbidden

# ------------------------------------------------------------ Calling a URL a tenant gave (never inside)
from scheduling import outbound

# ------------------------------------------------------------ Workload kinds
from scheduling import kinds
from scheduling.spec.workloads import DEFAULT_NOTEBOOK_IMAGE

# ------------------------------------------------------------ Commands
from scheduling import services
from scheduling.services import (
    MAX_PRIORITY,
    SubmitItem,
    SubmitReads,
    cancel_array_index,
    cancel_job,
    read_spec,
    record_event,
    release_suspended,
    requeue_job,
    require_submitter,
    stop_job_by_policy,
    stop_workload,
    submit_job,
    submit_jobs,
    suspend_jobs,
)

# ------------------------------------------------------------ Schedules (a spec's `schedule:`, its runs)
from scheduling import schedules
from scheduling.schedule_times import runs_in_month

# ------------------------------------------------------------ Dependencies and arrays
from scheduling.lifecycle.arrays import NoSuchIndex, array_children, array_detail
from scheduling.lifecycle.chain import chain_of, workspace_chains

# ------------------------------------------------------------ A job's life: end codes, attempts, max runtime
from scheduling.lifecycle.ends import END_CODES, end_reason_text
from scheduling.lifecycle.runtime import attempt_rows, job_life

# ------------------------------------------------------------ Workspace secrets and registry credentials
from scheduling import secrets
# ------------------------------------------------------------ Workspace volumes and datasets
from scheduling import storage
from scheduling.backends.kubernetes.claims import claim_index  # a kubelet-reported claim -> what it holds
# ------------------------------------------------------------ Workspace buckets (S3-compatible object storage)
from scheduling import buckets

# ------------------------------------------------------------ Reads
from scheduling import selectors
from scheduling.selectors import (
    PoolGpus,
    QueueShare,
    cluster_view,
    default_queue,
    node_health,
    pool_domain_gpus,
    pool_gpu_counts,
    queue_shares,
    queues_for_workspace,
)

# ------------------------------------------------------------ Expected starts
# (the forward replay through the scheduler core, kept while the cluster stays the same)
from scheduling.starts import StartOutlook, expected_starts, start_outlook
from scheduling.starts import cluster_snapshot as cluster_snapshot_now
from scheduling.forecast import PendingOutlook, StartWindow, pending_outlook, window_summary
from scheduling.positions import PositionNote, position_note

# ------------------------------------------------------------ Job specs
from scheduling.spec import (
    MAX_BYTES,
    PoolInfo,
    SpecError,
    image_form_values,
    parse_job_spec,
    parse_job_spec_obj,
    spec_to_yaml,
)
from scheduling.spec.model import DEFAULT_CPU_MILLI, DEFAULT_MEM_MIB, SHARING_MODES, JobSpec, RoleSpec
from scheduling.spec.cluster import role_request
from scheduling.spec.examples import workspace_examples
from scheduling.spec.load import load_yaml
from scheduling.spec.units import format_duration, format_memory, mig_memory_mib
from scheduling.tensorboard import PORT as TENSORBOARD_PORT
from scheduling.tensorboard import endpoint_of as tensorboard_endpoint_of
from scheduling.tensorboard import logdir_of as tensorboard_logdir_of

# ------------------------------------------------------------ GPU units and names
from scheduling.core.units import (
    MIG_SLICES_PER_GPU,
    MILLI_PER_GPU,
    gpu_model_name,
    mig_slices_milli,
    vendor_name,
)

# ------------------------------------------------------------ GPU sharing modes (a placement's stored slice)
from scheduling.sharing import GpuHolds, mode_of

# ------------------------------------------------------------ Placement rules, pure
# (the core's cluster model and fit checks, for quotes and the fragmentation view)
from scheduling.core import model as cluster_model
from scheduling.core.model import Pool, Request, level_name, mig_milli
from scheduling.core.fit import PoolTraits, check_gpu, check_pool, check_pool_identity, check_pools

# ------------------------------------------------------------ Capacity planning
# (what-if replays of the history or a trace on an edited cluster)
from scheduling.core.replay import Replay, ReplayJob
from scheduling.history import HistoryJob, cluster_snapshot, history_jobs, replay_jobs
from scheduling.queue_tree import QueueRow, validate_queue
from scheduling.traces import gang, late_allowed, percentile, read_philly

# ------------------------------------------------------------ Notebooks, inference services and logs
from scheduling import inference, logs, notebooks
from scheduling import service_revisions, service_usage
from scheduling.backends import get_backend
from scheduling.notebooks import Endpoint, base_url, endpoint_of, read_activity
from scheduling.ssh import SshTarget, has_ssh, running_job, ssh_target, ssh_token, use_key_reader
from scheduling.serving.idle import idle_since

# ------------------------------------------------------------ Model memory and serving advice
from scheduling.serving.memory import (
    BYTES_PER_PARAM,
    MAX_CONCURRENCY,
    MAX_CONTEXT,
    MAX_PARAMS_B,
    TASKS,
    MemoryNeed,
    fit_slice,
    inference_memory,
    memory_needed,
    model_shape,
    parse_params,
)
from scheduling.serving.latency import ServerModel, replicas_at_rate, slice_share

# ------------------------------------------------------------ Texts
from scheduling import history_texts
from scheduling.history_texts import AdminMessage, Said, Worded, joined, said
from scheduling.reasons import REASONS, job_reason, reason_text

# ------------------------------------------------------------ Signals and metrics
from scheduling import metrics, signals
from scheduling.metrics import LOCAL, USED_WINDOW, ClusterFigures, cluster_figures
from scheduling.signals import job_events_committed, job_finished, node_readiness_changed

# ------------------------------------------------------------ Node agents, admin and the demo
from scheduling.admin import ReadOnlyAdmin
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.inventory import MAX_GPUS, MAX_MEMORY_MIB, MAX_UUID, node_assignments, record_heartbeat
from scheduling.cycle.run import run_scheduling_cycle

# ------------------------------------------------------------ Off-peak calendar
# (the windows per currency: billing writes them, the scheduler reads them)
from scheduling import offpeak
from scheduling.offpeak import (
    DEFAULT_OFFPEAK_WINDOWS,
    Window,
    as_zone,
    is_offpeak,
    next_offpeak_start,
    offpeak_intervals,
    parse_windows,
    require_aware,
    require_duration,
    split_hours,
    validate_windows,
)
from scheduling.offpeak_calendar import CalendarVersion, write_versions, write_workspace_calendars

# ------------------------------------------------------------ Numbers and words for people
from scheduling import formats
from scheduling.formats import gettext, in_english, memory, ngettext, pgettext

# ------------------------------------------------------------ Tasks sent by name
from scheduling.broker import revoke_task, send_task

# ------------------------------------------------------------ Graceful eviction and checkpoints
from scheduling.lifecycle.checkpoints import checkpoint_fields, grace_of, job_summary, lost_of, queue_eviction_rate

# ------------------------------------------------------------ Work with a deadline
from scheduling import deadlines
from scheduling.deadlines import DeadlineRow, DeadlineView, at_risk, by_slack, phase_text
