"""The signals that keep a notebook, or a job with an open SSH session, active (the idle rule for any IDE).

It is active while any holds: kernel activity, SSH traffic in the window of at least `IDLE_SSH_BYTES`,
GPU use over the pool's threshold, or CPU over `IDLE_CPU_PCT` (percent of one core). A signal that is
not measured (a real Jupyter tells no CPU figure) never holds it active. The idle notice names the
quiet ones, with their figures.

SSH traffic comes from `ssh_bytes_by_job(since, until)`, the one place that reads the gateway's audit of
sessions; until that audit exists it answers nothing, and a caller (a test) may pass its own provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from billing import history_catalogue as texts
from scheduling.api import Said, joined, said

KERNEL, SSH, GPU, CPU = "kernel", "ssh", "gpu", "cpu"

SshBytes = Callable[[datetime, datetime], Mapping[int, int]]


_provider: SshBytes | None = None


def use_ssh_provider(provider: SshBytes | None) -> None:
    """Where ssh_bytes_by_job reads from: a layer above billing (the portal's SSH audit) registers its reader
    here at start-up (its AppConfig.ready), since billing may not import it; None: back to nothing."""
    global _provider
    _provider = provider


def ssh_bytes_by_job(since: datetime, until: datetime) -> dict[int, int]:
    """Per job that had an SSH session open at any moment of [since, until): the bytes in plus out in that
    span (0 for a session open but silent). A job not listed had no SSH session then. Answers nothing
    until the SSH gateway's session audit is wired here (directly, or through use_ssh_provider)."""
    return dict(_provider(since, until)) if _provider is not None else {}


def ssh_bytes() -> int:
    return settings.IDLE_SSH_BYTES


def cpu_pct() -> float:
    return float(settings.IDLE_CPU_PCT)


@dataclass(frozen=True)
class Quiet:
    """One signal that did not hold the workload active, and its figures (for the notice)."""

    signal: str
    figures: Mapping[str, object]

    def said(self) -> Said:
        if self.signal == KERNEL:
            return said(texts.QUIET_KERNEL)
        if self.signal == SSH:
            return said(texts.QUIET_SSH, bytes=self.figures["bytes"], threshold=self.figures["threshold"])
        if self.signal == GPU:
            return said(texts.QUIET_GPU, threshold=self.figures["threshold"])
        if self.figures.get("percent") is None:
            return said(texts.QUIET_CPU_UNMEASURED)
        return said(texts.QUIET_CPU, percent=self.figures["percent"], threshold=self.figures["threshold"])


def ssh_active(sent: int | None) -> bool:
    return sent is not None and sent >= ssh_bytes()


def ssh_quiet(sent: int) -> Quiet:
    return Quiet(SSH, {"bytes": sent, "threshold": ssh_bytes()})


def cpu_quiet(percent: float | None) -> Quiet:
    return Quiet(CPU, {"percent": None if percent is None else f"{round(percent, 1):g}", "threshold": f"{cpu_pct():g}"})


def quiet_said(quiet: list[Quiet]) -> Said | str:
    """"quiet: no kernel activity, SSH traffic 120 B (below 4096 B per window), ..." ("" when none)."""
    if not quiet:
        return ""
    return said(texts.QUIET_SIGNALS, signals=joined([q.said() for q in quiet], sep=", "))
