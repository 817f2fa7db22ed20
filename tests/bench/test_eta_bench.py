"""bench.replay --eta-accuracy (bench/eta.py): the product's forecast asked during a replay and scored against
the real starts, on a hand-made trace with a known answer and on the MIX1 excerpt (the CI smoke test)."""

import json
import math

import pytest

from bench import eta
from bench import replay as bench
from scheduling.core.replay import JobResult

FIXTURE = "tests/fixtures/traces/philly_mix1_excerpt.csv"
KEYS = {"coverage", "median_width_to_wait", "p90_width_to_wait", "median_abs_error_s", "by_queue", "by_size"}


def run_main(capsys, *argv) -> dict:
    assert bench.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_job_waiting_for_the_only_node_is_asked_at_submission_and_every_ten_minutes(tmp_path, capsys):
    # team a's 8-GPU job holds the node for 1500 s; team a's next one, submitted at 10 s, waits 1490 s: asked
    # at 10, 610 and 1210 s, each time told it starts when the first ends
    path = tmp_path / "trace.csv"
    path.write_text("job_id,user,num_gpu,submit_time,duration,best_effort\n1,a,8,0,1500,0\n2,a,8,10,100,0\n")
    out = run_main(capsys, "--trace", str(path), "--mode", "pool", "--gpus", "8", "--silo-gpus", "a=8",
                   "--eta-accuracy", "--json")
    figures = out["eta"]
    assert KEYS <= figures.keys() and figures == out["modes"]["pool"]["eta"]
    assert figures["answers"] == 3 and figures["jobs"] == 1
    assert figures["coverage"] == 1.0 and figures["median_abs_error_s"] <= 30
    assert 0 < figures["median_width_to_wait"] <= 0.05
    assert set(figures["by_queue"]) == {"a"} and set(figures["by_size"]) == {"5-8"}


def test_an_answer_that_misses_or_has_no_end_counts_as_such():
    def answer(earliest, latest, start=100.0):
        return eta.Answer("j", "q", 1, 0.0, 0.0, start, earliest, latest)

    figures = eta.eta_figures([answer(90, 110), answer(120, 130), answer(50, None), answer(None, None)])
    assert figures["coverage"] == 0.5                       # the range holding 100 and the open-ended one
    assert figures["started_before"] == 0.25 and figures["started_after"] == 0.0   # 100 is before 120-130
    late = eta.eta_figures([answer(40, 60), answer(90, 110)])
    assert (late["coverage"], late["started_before"], late["started_after"]) == (0.5, 0.0, 0.5)
    assert figures["open_ended"] == 0.25 and figures["unknown"] == 0.25
    assert figures["median_width_to_wait"] == 0.2           # widths 0.2, 0.1, inf, inf: the upper median
    assert figures["p90_width_to_wait"] is None             # infinitely wide
    assert figures["median_abs_error_s"] == 12.5            # middles 100 and 125: errors 0 and 25
    assert math.isinf(answer(50, None).width)


@pytest.mark.slow  # the MIX1 excerpt replayed
def test_the_mix1_excerpt_smoke(capsys, tmp_path, monkeypatch):
    kept = tmp_path / "answers.json"
    monkeypatch.setenv("BENCH_ETA_ANSWERS", str(kept))
    out = run_main(capsys, "--trace", FIXTURE, "--mode", "pool-besteffort", "--gpus", "152",
                   "--silo-gpus", "vc_6214e9=80,vc_ed69ec=56,vc_ee9e8c=72", "--eta-accuracy",
                   "--eta-asked-until", "120", "--json")
    figures = out["eta"]
    assert KEYS <= figures.keys()
    assert figures["answers"] > 0 and 0.0 <= figures["coverage"] <= 1.0
    assert sum(b["answers"] for b in figures["by_queue"].values()) == figures["answers"]
    assert sum(b["answers"] for b in figures["by_size"].values()) == figures["answers"]
    # the answers it wrote, calibrated again without replaying, give the same figures
    assert eta.main(["--score", str(kept)]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored == {k: v for k, v in figures.items() if k not in ("settings", "wall_s", "cpu_s")}


def test_the_synthetic_trace_is_the_same_for_a_seed_and_replays(tmp_path):
    rows = eta.synthetic_trace(teams=2, hours=0.5, gpus=16, seed=3)
    assert rows == eta.synthetic_trace(teams=2, hours=0.5, gpus=16, seed=3) and rows
    path = tmp_path / "synthetic.csv"
    assert eta.main(["--write-synthetic", str(path), "--teams", "2", "--hours", "0.5", "--gpus", "16"]) == 0
    trace = bench.read_philly_file(str(path))
    assert {j.team for j in trace} == {"team0", "team1"} and all(j.gpus in (1, 2, 4, 8, 16) for j in trace)


def test_the_hindsight_bound_is_the_narrowest_constant_range_holding_nine_in_ten():
    # asked at submission, the early replay says 100 s; they start at 100, 200, ..., 1000 s: ratios 1 to 10
    def answer(start, replay_earliest=100.0):
        return eta.Answer("j", "q", 1, 0.0, 0.0, start, None, None, replay_earliest, None)

    answers = [answer(100.0 * k) for k in range(1, 11)]
    # 9 of 10 held by 1x to 9x the early wait; widths 8 * 100 / wait, the median's wait 600 s
    assert eta.hindsight_bound(answers, "earliest") == {"median_width_to_wait": 1.333, "low": 1.0, "high": 9.0}
    # an answer the replay did not bound is a miss: now all ten ratios, the median's wait 500 s
    assert eta.hindsight_bound([*answers, answer(300.0, None)], "earliest") == {
        "median_width_to_wait": 1.8, "low": 1.0, "high": 10.0}
    assert eta.hindsight_bound(answers, "latest") is None   # no late bounds at all


def test_answers_scored_again_are_calibrated_with_what_was_known_when_asked(tmp_path, capsys):
    # five jobs of queue q started 3x as late as their first answers' latest, before the ask at 1000 s;
    # five more started 10x as late, after it: only the first five may stretch the answer
    first = {f"h{i}": (0.0, 0.0, 100.0, "q", 300.0) for i in range(5)}
    first |= {f"later{i}": (0.0, 0.0, 100.0, "q", 1500.0 + i) for i in range(5)}
    answers = [eta.Answer("x", "q", 1, 1000.0, 900.0, 1250.0, 1000.0, 1100.0, 1000.0, 1100.0)]
    (again,) = eta.recalibrated(answers, first)
    assert (again.earliest, again.latest) == (1000.0, 1300.0) and again.covered and not answers[0].covered
    (surged,) = eta.recalibrated(answers, first, {1000.0: 2.0})     # submissions came twice as fast: stretched again
    assert (surged.earliest, surged.latest) == (1000.0, 1600.0)
    path = tmp_path / "answers.json"
    eta.write_answers(str(path), answers, {"x": (1000.0, 1000.0, 1100.0)},
                      {"x": JobResult("x", "q", 900.0, 1250.0, None)}, {1000.0: 3.0})
    assert eta.read_answers(str(path)) == (answers, {"x": (1000.0, 1000.0, 1100.0, "q", 1250.0)}, {1000.0: 3.0})
    assert eta.main(["--score", str(path)]) == 0
    scored = json.loads(capsys.readouterr().out)   # no history, but a surge: 1000 + 3 x 100
    assert scored["coverage"] == 1.0 and scored["median_width_to_wait"] == round(300 / 350, 3)
