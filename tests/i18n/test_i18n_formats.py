"""Words the format helpers and the pages' scripts write, in Chinese: job states, durations and ages go
through the catalogue; the charts' date axes take their months from it (static/portal/chart_words.js)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.utils import translation

from scheduling import formats

LATIN = re.compile(r"[A-Za-z]")
NODE = shutil.which("node")
CHART_WORDS = Path(__file__).resolve().parents[2] / "static" / "portal" / "chart_words.js"


@pytest.mark.parametrize("state", sorted(formats.STATE_WORDS))
def test_a_job_state_reads_in_chinese_and_its_value_stays_in_english(state):
    assert formats.state_text(state) == state
    with translation.override("zh-hans"):
        assert not LATIN.search(formats.state_text(state)), formats.state_text(state)
        assert formats.in_english(formats.state_text, state) == state  # records keep the value


@pytest.mark.parametrize(("seconds", "english"), [(40, "40 s"), (42 * 60, "42 min"), (2 * 3600 + 5 * 60, "2 h 05 min"),
                                                  (3 * 86400 + 4 * 3600, "3 d 4 h")])
def test_a_duration_reads_in_chinese(seconds, english):
    assert formats.duration(seconds) == english
    with translation.override("zh-hans"):
        assert not LATIN.search(formats.duration(seconds)), formats.duration(seconds)


@pytest.mark.parametrize(("seconds", "english"), [(45, "45 s"), (12 * 60, "12 min"), (3 * 3600, "3 h"),
                                                  (2 * 86400, "2 d")])
def test_an_age_reads_in_chinese(seconds, english):
    assert formats.age(seconds) == english
    with translation.override("zh-hans"):
        assert not LATIN.search(formats.age(seconds)), formats.age(seconds)


def test_the_job_page_shows_its_state_and_timing_in_chinese(client, cluster, clock):
    from tests.factories import JobFactory, QueueFactory

    job = JobFactory(name="job-0", workspace=cluster.vision, submitted_by=cluster.alice, queue=QueueFactory())
    clock.advance(42 * 60)
    client.force_login(cluster.alice)
    html = client.get(f"/jobs/{job.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    state = re.search(r'id="job-state">([^<]*)<', html).group(1)
    timing = client.get(f"/jobs/{job.pk}/?partial=timing", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert state == formats.STATE_WORDS["Pending"] and not LATIN.search(state), state
    assert "42" in timing and not LATIN.search(timing), timing
    words = json.loads(re.search(r'data-state-words="([^"]*)"', html).group(1).replace("&quot;", '"'))
    assert set(words) == set(formats.STATE_WORDS) and not any(LATIN.search(w) for w in words.values())


def test_a_page_with_charts_gives_them_the_months_in_its_language(client, cluster, clock):
    client.force_login(cluster.alice)
    html = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert html.index("plotly-4.1.2.min.js") < html.index('id="chart-words"') < html.index("portal/chart_words.js")
    words = json.loads(re.search(r'<script id="chart-words" type="application/json">(.*?)</script>', html).group(1))
    assert words["language"] == "zh-hans" and words["months"][10] == "11月" and len(words["days"]) == 7


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_the_charts_take_the_pages_months_as_their_locale():
    words = {"language": "zh-hans", "months": [f"{n}月" for n in range(1, 13)], "days": list("日一二三四五六")}
    program = (
        "const calls = [];"
        "globalThis.window = {Plotly: {register: (m) => calls.push(['register', m]),"
        " setPlotConfig: (c) => calls.push(['config', c])}};"
        f"globalThis.document = {{getElementById: (id) => id === 'chart-words' ? {{textContent: {json.dumps(json.dumps(words))}}} : null}};"
        f"{CHART_WORDS.read_text(encoding='utf-8')}"
        "console.log(JSON.stringify(calls));")
    calls = json.loads(subprocess.run([NODE, "-e", program], capture_output=True, text=True, timeout=30,
                                      check=True).stdout)
    (_, locale), (_, config) = calls
    assert locale["moduleType"] == "locale" and locale["name"] == "zh-hans"
    assert locale["format"]["shortMonths"][10] == "11月" and locale["format"]["months"][0] == "1月"
    assert config == {"locale": "zh-hans"}
