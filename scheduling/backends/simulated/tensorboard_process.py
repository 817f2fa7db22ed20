"""A real TensorBoard beside a simulated job's first replica, on a free loopback port.

    python -m scheduling.backends.simulated.tensorboard_process --logdir DIR --path-prefix /tb/vision-lab/7/

TensorBoard binds the port itself (port 0: the kernel picks a free one, so two jobs never race for one);
once it listens this prints one JSON line, {"listening": "http://127.0.0.1:PORT/PREFIX/", "port": PORT}, the
ready line the process runtime reads as its URL (processes.py), then serves until stopped. No Django.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logdir", required=True, help="the folder on this machine the job writes its events to")
    parser.add_argument("--path-prefix", default="", help="the path TensorBoard serves under, e.g. /tb/ws/7")
    parser.add_argument("--host", default="127.0.0.1")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    Path(args.logdir).mkdir(parents=True, exist_ok=True)  # the job may not have written anything yet
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    from tensorboard import program  # slow to import: after the arguments are known good

    board = program.TensorBoard()
    prefix = "/" + args.path_prefix.strip("/") if args.path_prefix.strip("/") else ""
    board.configure(argv=[None, "--logdir", args.logdir, "--host", args.host, "--port", "0",
                          "--path_prefix", prefix, "--reload_interval", "5", "--load_fast", "false"])
    url = board.launch()
    port = urlsplit(url).port
    print(json.dumps({"listening": f"http://{args.host}:{port}{prefix}/", "port": port}), flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()


if __name__ == "__main__":
    sys.exit(main())
