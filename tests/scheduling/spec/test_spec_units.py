"""Quantity parsing and formatting used by the spec (CPU, memory, durations, GPU amounts, MIG)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling.spec.units import (
    format_cpu,
    format_duration,
    format_gpu_milli,
    format_memory,
    mig_compute_milli,
    mig_memory_mib,
    parse_cpu,
    parse_duration,
    parse_gpu_amount,
    parse_memory,
)


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("1Ki", 1),
        ("1536Ki", 2),
        ("512Mi", 512),
        ("16Gi", 16384),
        ("1Ti", 1 << 20),
        ("1G", 954),
        ("0.5Gi", 512),
    ],
)
def test_memory_rounds_up_to_whole_mib(text: str, mib: int) -> None:
    assert parse_memory(text) == mib


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (16, "has no unit; write e.g. 16Gi or 512Mi"),
        ("16", "has no unit; write e.g. 16Gi or 512Mi"),
        ("16GiB", "uses an unknown unit; write 16Gi (Ki, Mi, Gi, Ti)"),
        ("lots", "is not a memory amount (e.g. 16Gi or 512Mi)"),
        ("0Gi", "must be more than 0"),
        ("17Ti", "is more than 16Ti"),
    ],
)
def test_memory_errors(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_memory(value)


@pytest.mark.parametrize(
    ("value", "milli"), [(4, 4000), (0.5, 500), ("250m", 250), ("1.5", 1500), (".25", 250)]
)
def test_cpu(value: object, milli: int) -> None:
    assert parse_cpu(value) == milli


@pytest.mark.parametrize("value", [True, None, "4 cores", "-1", 2000, "0.0005"])
def test_cpu_errors(value: object) -> None:
    with pytest.raises(ValueError):
        parse_cpu(value)


def test_durations_parse_and_format_back() -> None:
    for seconds in (1, 59, 60, 3600, 5400, 86400, 90061, 90 * 86400):
        assert parse_duration(format_duration(seconds)) == seconds
    assert format_duration(90061) == "1d1h1m1s"
    for bad in ("", "h", "1x", "1h1h", "-1h", "0s", "91d", 5, True):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_gpu_amounts_are_exact() -> None:
    assert parse_gpu_amount(0.07) == Decimal("0.07")
    assert parse_gpu_amount(2) == Decimal(2)
    for bad in (True, "1", float("inf"), -0.5):
        with pytest.raises(ValueError):
            parse_gpu_amount(bad)


def test_formatting() -> None:
    assert (format_cpu(4000), format_cpu(1500)) == (4, "1500m")
    assert (format_memory(512), format_memory(2048), format_memory(1 << 20)) == ("512Mi", "2Gi", "1Ti")
    assert (format_gpu_milli(2000), format_gpu_milli(70)) == (2, 0.07)


def test_mig_profiles() -> None:
    # memory: what an instance can use (scheduling.core.mig), under the name's figure
    assert (mig_compute_milli("7g.80gb"), mig_memory_mib("7g.80gb")) == (1000, 80384)
    assert (mig_compute_milli("1g.5gb"), mig_memory_mib("1g.5gb")) == (142, 4864)
    assert mig_memory_mib("1g.18gb") == 16384          # H200, read by NVML on a real card
    assert mig_memory_mib("6g.99gb") == 99 * 1024      # not in the table: the name's figure
