"""Many simulated node agents in one process, for the demo cluster of `make run`.

Each node gets the same Agent, spool and uploader as a real node; only the collector is the
simulated one (it reads what the portal says runs on the node).
`python -m nodeagent.fleet --portal URL --tokens FILE [--interval 10] [--spool-dir DIR]`
where FILE is JSON: {"node name": {"token": "gpn_...", "gpus": 8, "model": "...", "memory_mib": N}}.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path

from nodeagent.agent import Agent, AgentConfig
from nodeagent.portal import PortalClient
from nodeagent.simulated import LastKnownAssignments, SimulatedCollector
from nodeagent.spool import Spool

log = logging.getLogger("nodeagent.fleet")


def start_agent(portal: str, node: str, info: dict, interval: float, spool_dir: Path) -> Agent:
    client = PortalClient(portal, info["token"])
    collector = SimulatedCollector(LastKnownAssignments(lambda: client.get_assignments(node)), node=node,
                                   gpus=info.get("gpus", 8), model=info.get("model", "simulated GPU"),
                                   memory_mib=info.get("memory_mib", 81920), seed=hash(node) % 1000)
    agent = Agent(AgentConfig(node=node, interval_s=interval, collector_name="simulated"), collector,
                  Spool(spool_dir / f"spool-{node}.sqlite"), client)
    threading.Thread(target=agent.run, name=f"agent-{node}", daemon=True).start()
    return agent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nodeagent.fleet", description=__doc__.splitlines()[0])
    parser.add_argument("--portal", required=True)
    parser.add_argument("--tokens", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--spool-dir", type=Path, default=Path("var/agents"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise here
    nodes = json.loads(args.tokens.read_text())
    args.spool_dir.mkdir(parents=True, exist_ok=True)
    agents = [start_agent(args.portal, node, info, args.interval, args.spool_dir) for node, info in nodes.items()]
    log.info("%d simulated node agents reporting to %s every %.0f s", len(agents), args.portal, args.interval)
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    for agent in agents:
        agent.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
