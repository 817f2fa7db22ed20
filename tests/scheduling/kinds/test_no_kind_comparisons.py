"""Outside scheduling/kinds (and migrations), no code compares a workload kind's name: each asks the kind
object. This reads the platform's Python, templates and scripts for a comparison with a kind's name."""

from __future__ import annotations

import re
from pathlib import Path

from scheduling import kinds

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("portal", "billing", "scheduling", "gpuctl", "templates", "static")
SUFFIXES = (".py", ".html", ".js")
SKIPPED = ("scheduling/kinds/", "/migrations/", "static/vendor/")


def comparisons(text: str, names: tuple[str, ...]) -> list[str]:
    """Lines that compare something called kind with a kind's name, or use the old JobKind members."""
    name = "|".join(re.escape(n) for n in names)
    quoted = rf"""["']({name})["']"""
    compare = re.compile(rf"""kind[\w.\]\)'"]*\s*(===?|!==?|\bnot in\b|\bin\b)\s*[\(\[{{]?\s*{quoted}"""
                         rf"""|{quoted}\s*(===?|!==?)\s*[\w.\[\]'"]*kind""")
    return [line.strip() for line in text.splitlines() if compare.search(line) or "JobKind." in line]


def test_the_scan_finds_what_it_looks_for():
    names = ("training", "notebook")
    assert comparisons('if job.kind == "notebook":\n', names)
    assert comparisons("{% if job.kind != 'training' %}", names)
    assert comparisons('if (quote.kind === "notebook") return 1;', names)
    assert comparisons('    if spec.kind not in ("notebook", "x"):', names)
    assert comparisons("x = JobKind.NOTEBOOK", names)
    assert not comparisons('if task == "training":', names)  # the memory estimate's task, not a kind
    assert not comparisons('kind = kinds.get("notebook")', names)


def test_no_module_outside_the_kinds_compares_a_kind_name():
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*")):
            where = path.relative_to(ROOT).as_posix()
            if path.suffix not in SUFFIXES or any(skip in f"/{where}" for skip in SKIPPED):
                continue
            found += [f"{where}: {line}" for line in comparisons(path.read_text(errors="replace"), kinds.names())]
    assert found == []
