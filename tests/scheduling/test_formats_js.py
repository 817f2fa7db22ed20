"""The pages' script formats money and sizes as the server does (static/portal/formats.js through
Intl.NumberFormat, scheduling/formats.py): the same text for the same amount, in English and Chinese."""

from __future__ import annotations

import json
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from scheduling import formats

SCRIPT = Path(__file__).resolve().parents[2] / "static" / "portal" / "formats.js"
NODE = shutil.which("node")
AMOUNTS = [("19705.15", "CNY"), ("4349.55", "CNY"), ("1234.505", "USD"), ("-0.5", "USD"), ("1000000", "EUR"),
           ("0.85", "usd"), ("1000000", "CHF")]
RATES = [("0.424", "USD"), ("7.2", "CNY"), ("0", "USD"), ("1.128", "USD"), ("21600.5", "CNY"), ("0.5", "CHF")]
SIZES = [0, 512, 1024, 1536, 81920, 1024 * 1024, 3 * 1024 * 1024]


def in_browser(language: str) -> dict:
    """What formats.js writes on a page whose <html lang> is `language`."""
    program = (f"globalThis.window = {{}}; globalThis.document = {{documentElement: {{lang: {json.dumps(language)}}}}};"
               f"{SCRIPT.read_text(encoding='utf-8')}"
               f"const f = window.portalFormats;"
               f"console.log(JSON.stringify({{money: {json.dumps(AMOUNTS)}.map(([a, c]) => f.money(a, c)),"
               f" rate: {json.dumps(RATES)}.map(([a, c]) => f.rate(a, c)),"
               f" memory: {json.dumps(SIZES)}.map((m) => f.memory(m))}}));")
    done = subprocess.run([NODE, "-e", program], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_script_writes_what_the_server_writes(language):
    shown = in_browser(language)
    assert shown["money"] == [formats.money(Decimal(a), c, language) for a, c in AMOUNTS]
    assert shown["memory"] == [formats.memory(m) for m in SIZES]
    assert shown["money"][0] == "¥19,705.15"
    # a price per hour keeps its places, as the server writes it
    assert shown["rate"] == [formats.rate(Decimal(a), c, language) for a, c in RATES]
    assert shown["rate"][:4] == ["$0.424", "¥7.20", "$0.00", "$1.128"]
