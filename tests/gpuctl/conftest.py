"""The live-server fixtures of the gpuctl tests: `gpuctl` in-process against the real ASGI server,
API tokens for alice and bob, and the example specs as files."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest


@pytest.fixture
def specs(tmp_path) -> dict[str, Path]:
    from scheduling.spec.examples import CLEAN_YAML, SEED_YAML

    paths = {"seed": tmp_path / "seed.yaml", "clean": tmp_path / "clean.yaml"}
    paths["seed"].write_text(SEED_YAML)
    paths["clean"].write_text(CLEAN_YAML)
    return paths


@pytest.fixture
def gpuctl(live_daphne, capsys, tmp_path, monkeypatch):
    """Runs `gpuctl` in-process as a user (by token); returns (exit code, stdout, stderr).
    HOME points at an empty folder so no real config file is read; `env` adds or replaces variables."""

    def run(token: str, *argv: str, stdin: str | None = None, env: dict[str, str] | None = None
            ) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        environ = {"HOME": str(tmp_path), "GPUCTL_URL": live_daphne.url, "GPUCTL_TOKEN": token, **(env or {})}
        from gpuctl.cli import main

        code = main(list(argv), env=environ)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def tokens(cluster) -> dict[str, str]:
    from portal.services import create_api_token

    return {name: create_api_token(getattr(cluster, name), "cli test")[1] for name in ("alice", "bob")}
