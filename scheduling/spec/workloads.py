"""What a notebook or an inference service adds to a JobSpec (pure data, no Django).

A spec's `kind` says what the work is: `training` (a batch job, the default), `notebook` (one
interactive replica with a persistent home volume and an idle policy) or `inference` (a model server
whose replicas scale between min and max on a target). Both new kinds keep the one role of a
`single` job, so the scheduler, the quote and the ledger see them as they see any job.
"""

from __future__ import annotations

from dataclasses import dataclass

NOTEBOOK_QUOTE_S = 3600  # a notebook runs until stopped: quoted per hour unless a duration is stated
SERVERS = ("vllm", "triton", "custom")
# concurrency: requests in flight per replica; rps: requests per second per replica; queueDepth: requests
# waiting per replica; ttftP95: seconds to the first token at the 95th percentile (the servers' histograms)
TARGET_METRICS = ("concurrency", "rps", "queueDepth", "ttftP95")

# The role each kind's single role is called (launch and logs name replicas by role).
NOTEBOOK_ROLE = "notebook"
SERVER_ROLE = "server"

DEFAULT_NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-latest"  # JupyterLab with CUDA PyTorch
DEFAULT_NOTEBOOK_GPU = "0.5"        # half a GPU, shared by fraction
DEFAULT_HOME_MIB = 10 * 1024
MAX_HOME_MIB = 1024 * 1024          # 1Ti
MIN_IDLE_AFTER_S = 60
MAX_IDLE_AFTER_S = 24 * 3600

# Per server: the image, the port it listens on and the path that answers 200 once it is ready.
SERVER_DEFAULTS: dict[str, tuple[str | None, int | None, str | None]] = {
    "vllm": ("vllm/vllm-openai:v0.5.4", 8000, "/health"),
    "triton": ("nvcr.io/nvidia/tritonserver:24.07-py3", 8000, "/v2/health/ready"),
    "custom": (None, None, None),   # the spec names all three
}
DEFAULT_SCALE_DOWN_DELAY_S = 300
MAX_SCALE_DOWN_DELAY_S = 24 * 3600
MAX_TARGET_CONCURRENCY = 10_000
MAX_TARGET_RPS = 100_000
MAX_TARGET_TTFT_S = 600
LIMIT_KEYS = ("requestsPerMinute", "tokensPerMinute")
MAX_REQUESTS_PER_MINUTE = 1_000_000
MAX_TOKENS_PER_MINUTE = 1_000_000_000


@dataclass(frozen=True)
class NotebookSpec:
    """home_mib: the persistent home volume (kept across stop and start, gone with the notebook).
    idle_after_s: stop after this long with no kernel activity and no GPU use; None = the idle
    window of the pool the notebook runs in (NodePool.idle_window_min)."""

    home_mib: int = DEFAULT_HOME_MIB
    idle_after_s: int | None = None


@dataclass(frozen=True)
class InferenceSpec:
    """A model server. Exactly one of model_path (a path on a volume) and model_registry (a
    registry reference) is set, or neither for a custom image that holds its model.
    gpu_mem_limit_mib: a fraction's burstable memory limit above its request (None: no burst).
    The role's min_replicas may be 0 (scale to zero); replicas above it are elastic."""

    server: str
    port: int
    health_path: str
    model_path: str | None = None
    model_registry: str | None = None
    model_name: str | None = None         # the name clients ask for; None = the service's name
    gpu_mem_limit_mib: int | None = None
    target_metric: str = "concurrency"    # one of TARGET_METRICS
    target_value: float = 8
    scale_down_delay_s: int = DEFAULT_SCALE_DOWN_DELAY_S
    requests_per_minute: int | None = None  # limits.requestsPerMinute: the endpoint answers 429 above it
    tokens_per_minute: int | None = None    # limits.tokensPerMinute: prompt + completion tokens
