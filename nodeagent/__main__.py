"""gpu-node-agent / python -m nodeagent: report this node's GPU usage to the portal."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from nodeagent import __version__
from nodeagent import metrics as agent_metrics
from nodeagent.agent import Agent, AgentConfig, Collector
from nodeagent.kubelet import KubeletVolumeStats
from nodeagent.nvml import NvmlCollector, NvmlUnavailable, load_nvml
from nodeagent.portal import (
    PortalAuthError,
    PortalClient,
    PortalError,
    backoff_delay,
    check_portal_url,
    exchange_join_token,
)
from nodeagent.simulated import LastKnownAssignments, SimulatedCollector
from nodeagent.spool import Spool

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NVML_UNAVAILABLE = 3
EXIT_JOIN_REFUSED = 4

log = logging.getLogger("nodeagent")


def default_spool(node: str) -> Path:
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "gpu-node-agent" / f"spool-{node}.sqlite"


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="gpu-node-agent",
        description="Collect GPU usage on this node, spool it locally and upload it to the portal.",
    )
    p.add_argument("--portal", default=env("GPU_AGENT_PORTAL"), help="portal base URL [GPU_AGENT_PORTAL]")
    p.add_argument("--token", default=env("GPU_AGENT_TOKEN"),
                   help="this node's token [GPU_AGENT_TOKEN; prefer the variable: argv is visible in ps]")
    p.add_argument("--join-token", default=env("GPU_AGENT_JOIN_TOKEN"),
                   help="a pool's join token, exchanged at start for this node's own token (kept in memory) when "
                        "no --token is given [GPU_AGENT_JOIN_TOKEN]")
    p.add_argument("--join-token-file", type=Path, default=env("GPU_AGENT_JOIN_TOKEN_FILE"),
                   help="read the join token from this file (a mounted Secret) [GPU_AGENT_JOIN_TOKEN_FILE]")
    p.add_argument("--collector", choices=["nvml", "simulated"], default=env("GPU_AGENT_COLLECTOR", "nvml"))
    p.add_argument("--interval", type=float, default=float(env("GPU_AGENT_INTERVAL", "10")),
                   help="seconds between samples (default 10)")
    p.add_argument("--spool", type=Path, default=env("GPU_AGENT_SPOOL"),
                   help="SQLite spool file (default ~/.local/state/gpu-node-agent/spool-NODE.sqlite)")
    p.add_argument("--node", default=env("GPU_AGENT_NODE") or socket.gethostname(), help="node name")
    p.add_argument("--batch-size", type=int, default=500, help="samples per upload (default 500)")
    p.add_argument("--heartbeat-every", type=int, default=2,
                   help="intervals between heartbeats (default 2); keep interval x this well below the portal's "
                        "NODE_NOT_READY_AFTER_S (60 s), or the node is taken for lost")
    p.add_argument("--backoff-cap", type=float, default=300.0, help="longest wait between retries, s")
    p.add_argument("--proc-root", type=Path, default=Path(env("GPU_AGENT_PROC_ROOT", "/proc")),
                   help="where the host's /proc is mounted (to map processes to pods)")
    p.add_argument("--kubelet-metrics", default=env("GPU_AGENT_KUBELET_METRICS"),
                   help="the kubelet's metrics URL, e.g. https://$NODE_IP:10250/metrics: report each claim's "
                        "kubelet_volume_stats_used_bytes for storage billing (default: off) [GPU_AGENT_KUBELET_METRICS]")
    p.add_argument("--kubelet-insecure", action="store_true",
                   default=env("GPU_AGENT_KUBELET_INSECURE", "").lower() in ("1", "true", "yes"),
                   help="do not check the kubelet's serving certificate (a self-signed one, not issued by the "
                        "cluster's CA) [GPU_AGENT_KUBELET_INSECURE]")
    p.add_argument("--volumes-every", type=int, default=30,
                   help="intervals between volume-stats reports (default 30)")
    sim = p.add_argument_group("simulated collector")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--sim-gpus", type=int, default=8)
    sim.add_argument("--sim-model", default="NVIDIA A100-SXM4-80GB")
    sim.add_argument("--sim-memory-mib", type=int, default=81920)
    p.add_argument("--metrics-port", type=int, default=int(env("GPU_AGENT_METRICS_PORT", "0")),
                   help="serve Prometheus /metrics on this port (default 0: off) [GPU_AGENT_METRICS_PORT]")
    p.add_argument("--metrics-address", default=env("GPU_AGENT_METRICS_ADDRESS", "0.0.0.0"),
                   help="address for --metrics-port (default 0.0.0.0) [GPU_AGENT_METRICS_ADDRESS]")
    p.add_argument("--probe", action="store_true",
                   help="print the inventory and one set of readings as JSON, then exit (no portal needed)")
    p.add_argument("--log-level", type=str.upper, default=env("GPU_AGENT_LOG_LEVEL", "INFO"),
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--version", action="version", version=f"gpu-node-agent {__version__}")
    return p


def make_collector(args: argparse.Namespace, client: PortalClient | None) -> Collector:
    if args.collector == "nvml":
        return NvmlCollector(load_nvml(), proc_root=args.proc_root)
    fetch = (lambda: client.get_assignments(args.node)) if client else (lambda: {"assignments": []})
    return SimulatedCollector(
        LastKnownAssignments(fetch), node=args.node, gpus=args.sim_gpus, model=args.sim_model,
        memory_mib=args.sim_memory_mib, seed=args.seed,
    )


def probe(collector: Collector) -> None:
    readings = collector.sample(datetime.now(UTC))
    print(json.dumps({
        "inventory": [g.to_json() for g in collector.inventory()],
        "readings": [r.__dict__ for r in readings],
    }, indent=2))


def start_metrics(args: argparse.Namespace, collector: Collector, spool: Spool, client: PortalClient):
    """Serve /metrics; returns the collector and client wrapped so the figures follow the agent's work."""
    recording, uploads = agent_metrics.RecordingCollector(collector), agent_metrics.UploadWatch(client)
    stats = (agent_metrics.NvmlDeviceStats(collector) if isinstance(collector, NvmlCollector)
             else agent_metrics.SimulatedDeviceStats())
    server = agent_metrics.serve(agent_metrics.AgentMetrics(args.node, recording, spool, uploads, stats),
                                 args.metrics_port, args.metrics_address)
    log.info("metrics on http://%s:%d/metrics", args.metrics_address, server.server_port)
    return recording, uploads


def join_token_of(args: argparse.Namespace) -> str | None:
    if args.join_token:
        return args.join_token
    if args.join_token_file:
        return args.join_token_file.read_text().strip() or None
    return None


def joined_token(args: argparse.Namespace, join_token: str, *, attempts: int = 8, sleep=None) -> str:
    """This node's token for the join token, retrying while the portal cannot answer (it may still be
    starting); a refusal is final."""
    import random
    import time

    sleep = sleep or time.sleep
    rng = random.Random()
    for failure in range(1, attempts + 1):
        try:
            token = exchange_join_token(args.portal, join_token, args.node)
            log.info("joined: node %s has its own token now", args.node)
            return token
        except PortalAuthError:
            raise
        except PortalError as exc:
            if failure == attempts:
                raise
            delay = backoff_delay(failure, max(args.interval, 1.0), args.backoff_cap, rng)
            log.warning("join failed (%s); retrying in %.0f s", exc, delay)
            sleep(delay)
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    client = None
    if not args.probe:
        if not args.portal:
            parser.error("--portal (or GPU_AGENT_PORTAL) is required")
        join_token = None if args.token else join_token_of(args)
        if not args.token and not join_token:
            parser.error("--token (or GPU_AGENT_TOKEN) is required, or a join token (--join-token, "
                         "GPU_AGENT_JOIN_TOKEN or GPU_AGENT_JOIN_TOKEN_FILE)")
        try:
            check_portal_url(args.portal)
            config = AgentConfig(
                node=args.node, interval_s=args.interval, batch_size=args.batch_size,
                heartbeat_every=args.heartbeat_every, backoff_cap_s=max(args.backoff_cap, 1.0),
                collector_name=args.collector, volumes_every=args.volumes_every,
            )
        except ValueError as exc:
            parser.error(str(exc))
        if join_token:
            try:
                args.token = joined_token(args, join_token)
            except PortalError as exc:
                print(f"gpu-node-agent: could not join: {exc}", file=sys.stderr)
                return EXIT_JOIN_REFUSED
        client = PortalClient(args.portal, args.token)
    try:
        collector = make_collector(args, client)
    except NvmlUnavailable as exc:
        print(f"gpu-node-agent: NVML is not available on this machine: {exc}.\n"
              "Install the NVIDIA driver (libnvidia-ml.so.1) and run on a GPU node, "
              "or use --collector simulated.", file=sys.stderr)
        return EXIT_NVML_UNAVAILABLE
    except ValueError as exc:
        parser.error(str(exc))
    if args.probe:
        probe(collector)
        collector.close()
        return EXIT_OK

    spool = Spool(args.spool or default_spool(args.node))
    if args.metrics_port:
        collector, client = start_metrics(args, collector, spool, client)
    volume_stats = KubeletVolumeStats(args.kubelet_metrics, insecure=args.kubelet_insecure) if args.kubelet_metrics else None
    agent = Agent(config, collector, spool, client, volume_stats=volume_stats)

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        # Set the event from another thread: the main thread may hold the event's lock right now.
        threading.Thread(target=agent.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        agent.run()
    finally:
        collector.close()
        client.close()
        spool.close()
        if volume_stats is not None:
            volume_stats.close()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
