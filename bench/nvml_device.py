"""The node agent on a real GPU: what NVML reads, and what the agent sends the portal.

Run on a machine with an NVIDIA driver and PyTorch (a GPU load is needed to have something to meter):

    python3 -m bench.nvml_device --out DIR [--seconds 24]

It starts, all on this machine:
- a GPU load (PyTorch: 8 GiB held, bf16 matrix products at part duty), as if it ran in a pod;
- a recording portal on 127.0.0.1 that accepts every heartbeat and sample and keeps what it got;
- the agent itself (`python -m nodeagent --collector nvml`), its /metrics served and scraped once;
- `--probe` once, and the collector's health figures;
- the GPU's MIG profiles as NVML describes them (read only: MIG mode is left as it is).

There is no kubelet here, so the load's pod is named through a /proc tree of one file (`--proc-root`): the
load's pid with a kubepods cgroup line. Everything else is the machine's. DIR/nvml_device.json holds it all;
DIR/agent.log the agent's log. Prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

POD_UID = "5e1f0c2a-7b3d-4e6f-9a8b-1c2d3e4f5a6b"
NODE = "h200-device"
LOAD = r"""
import sys, time, torch
seconds = float(sys.argv[1])
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
held = torch.empty(8 * 2**30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
end = time.time() + seconds
while time.time() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
    time.sleep(0.05)
"""


class RecordingPortal(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.posts: list[dict] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: RecordingPortal

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.posts.append({"path": self.path, "time": time.time(), "body": body})
        if self.path.endswith("/usage"):
            answer = {"accepted": [s.get("id") for s in body.get("samples", [])], "rejected": []}
        else:
            answer = {"node": body.get("node"), "gpus": len(body.get("gpus", [])), "rejected": []}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def mig_profiles(nvml) -> list[dict]:
    """Every GPU-instance profile NVML describes for GPU 0 (none where the card has no MIG)."""
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    out = []
    for profile in range(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfoV(handle, profile)
        except (nvml.NVMLError, AttributeError, TypeError) as exc:
            out.append({"profile": profile, "error": f"{type(exc).__name__}: {exc}"})
            continue
        name = getattr(info, "name", "")
        name = name.decode() if isinstance(name, bytes) else name
        out.append({"profile": profile, "id": info.id, "name": name, "slices": info.sliceCount,
                    "instances": info.instanceCount, "sms": info.multiprocessorCount,
                    "memory_mb": info.memorySizeMB})
    return out


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=24.0, help="how long the agent runs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import pynvml

    from nodeagent.nvml import NvmlCollector

    result: dict = {"pod_uid": POD_UID, "node": NODE, "nvml_version": pynvml.__version__
                    if hasattr(pynvml, "__version__") else None}
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,mig.mode.current",
                          "--format=csv,noheader"], capture_output=True, text=True)
    result["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()

    load = subprocess.Popen([sys.executable, "-c", LOAD, str(args.seconds + 20)], stdout=subprocess.PIPE, text=True)
    assert load.stdout.readline().strip() == "ready", "the GPU load did not start"
    proc_root = Path(tempfile.mkdtemp(prefix="proc-"))
    (proc_root / str(load.pid)).mkdir()
    pod_slice = POD_UID.replace("-", "_")
    (proc_root / str(load.pid) / "cgroup").write_text(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_slice}.slice/cri-containerd-1.scope\n")
    result["load_pid"] = load.pid

    collector = NvmlCollector(pynvml, proc_root=proc_root)
    result["inventory"] = [gpu.to_json() for gpu in collector.inventory()]
    result["mig_profiles"] = mig_profiles(pynvml)
    time.sleep(2)
    started = time.perf_counter()
    result["collector_sample"] = [r.__dict__ for r in collector.sample(datetime.now(UTC))]
    result["collector_sample_s"] = round(time.perf_counter() - started, 4)
    result["collector_health"] = collector.health()
    collector.close()

    probe = subprocess.run([sys.executable, "-m", "nodeagent", "--probe", "--collector", "nvml",
                            "--proc-root", str(proc_root)], capture_output=True, text=True)
    result["probe"] = json.loads(probe.stdout) if probe.returncode == 0 else {"rc": probe.returncode,
                                                                             "stderr": probe.stderr[-2000:]}

    portal = RecordingPortal()
    threading.Thread(target=portal.serve_forever, daemon=True).start()
    metrics_port = 9477
    with open(args.out / "agent.log", "w") as log:
        agent = subprocess.Popen(
            [sys.executable, "-m", "nodeagent", "--portal", portal.url, "--token", "device-check",
             "--collector", "nvml", "--interval", "2", "--heartbeat-every", "2", "--node", NODE,
             "--proc-root", str(proc_root), "--spool", str(Path(tempfile.mkdtemp()) / "spool.db"),
             "--metrics-port", str(metrics_port), "--metrics-address", "127.0.0.1"],
            stdout=log, stderr=subprocess.STDOUT)
        time.sleep(args.seconds * 2 / 3)
        try:
            result["metrics"] = [line for line in scrape(metrics_port).splitlines()
                                 if line.startswith("gpu_platform_agent_")]
        except OSError as exc:
            result["metrics"] = [f"scrape failed: {exc}"]
        time.sleep(args.seconds / 3)
        agent.terminate()
        result["agent_rc"] = agent.wait(timeout=30)
    load.terminate()
    load.wait(timeout=30)
    portal.shutdown()
    result["posts"] = portal.posts
    (args.out / "nvml_device.json").write_text(json.dumps(result, indent=1, default=str))

    samples = [s for p in portal.posts if p["path"].endswith("/usage") for s in p["body"]["samples"]]
    pod_samples = [s for s in samples if s.get("pod_uid") == POD_UID]
    heartbeats = [p for p in portal.posts if p["path"].endswith("/heartbeat")]
    print(f"nvidia-smi: {result['nvidia_smi']}")
    for gpu in result["inventory"]:
        print(f"inventory: {gpu}")
    print(f"collector.sample: {len(result['collector_sample'])} readings in {result['collector_sample_s']} s: "
          f"{result['collector_sample']}")
    print(f"health: {result['collector_health']}")
    print(f"mig profiles: {[p.get('name') or p.get('error') for p in result['mig_profiles']]}")
    print(f"agent: rc {result['agent_rc']}, {len(heartbeats)} heartbeats, {len(samples)} samples, "
          f"{len(pod_samples)} for pod {POD_UID}")
    for s in pod_samples:
        print(f"  pod sample: {s}")
    print(f"metrics: {result['metrics'][:30]}")
    return 0 if pod_samples and heartbeats else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
