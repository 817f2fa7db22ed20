"""`gpuctl` against the real ASGI server on the test database, with real API tokens."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scheduling.spec.examples import CLEAN_YAML, SEED_YAML

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)


def submit(gpuctl, token: str, path: Path) -> int:
    code, out, err = gpuctl(token, "--json", "submit", str(path))
    assert code == 0, err
    return json.loads(out)["id"]


def test_alice_submits_lists_shows_and_cancels(gpuctl, tokens, specs):
    alice = tokens["alice"]
    code, out, err = gpuctl(alice, "submit", str(specs["seed"]))
    assert code == 0, err
    seed_id = int(re.match(r"submitted job (\d+) \(training1\) to vision-lab, queue vision-lab: Pending", out)[1])
    assert "pending reason:" in out
    clean_id = submit(gpuctl, alice, specs["clean"])

    code, out, _ = gpuctl(alice, "jobs", "--state", "pending")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split()[:5] == ["ID", "NAME", "WORKSPACE", "QUEUE", "STATE"]
    assert sorted((row.split()[0], row.split()[1], row.split()[4]) for row in rows) == sorted(
        [(str(seed_id), "training1", "Pending"), (str(clean_id), "bert-finetune", "Pending")])
    assert len({header.index("STATE")} | {row.index("Pending") for row in rows}) == 1  # aligned

    code, out, _ = gpuctl(alice, "--json", "--workspace", "vision-lab", "jobs")
    listed = json.loads(out)
    assert code == 0 and {(j["id"], j["state"], j["workspace"]) for j in listed} == {
        (seed_id, "Pending", "vision-lab"), (clean_id, "Pending", "vision-lab")}

    code, out, _ = gpuctl(alice, "show", str(clean_id))
    assert code == 0
    assert re.search(rf"^job\s+{clean_id}\nname\s+bert-finetune$", out, re.M), out
    assert re.search(r"^state\s+Pending$", out, re.M) and re.search(r"^queue\s+vision-lab$", out, re.M)
    assert re.search(r"^pending reason\s+\S", out, re.M)
    events = out.split("\nevents\n", 1)[1].splitlines()
    assert events[0].split() == ["TIME", "(UTC)", "KIND", "STATE", "REASON"] and "submitted" in events[1]

    code, out, _ = gpuctl(alice, "--json", "show", str(clean_id))
    shown = json.loads(out)
    assert code == 0 and shown["id"] == clean_id and [e["kind"] for e in shown["events"]] == ["submitted"]

    code, out, err = gpuctl(alice, "cancel", str(seed_id))
    assert (code, out.strip()) == (0, f"job {seed_id} (training1): Cancelled"), err
    code, out, _ = gpuctl(alice, "--json", "jobs", "--state", "Pending")
    assert [j["id"] for j in json.loads(out)] == [clean_id]
    code, out, _ = gpuctl(alice, "jobs", "--state", "Cancelled")
    assert [row.split()[0] for row in out.splitlines()[1:]] == [str(seed_id)]


def test_bob_sees_none_of_alices_jobs(gpuctl, tokens, specs):
    alice_job = submit(gpuctl, tokens["alice"], specs["clean"])
    bob = tokens["bob"]
    assert gpuctl(bob, "jobs") == (0, "no jobs\n", "")
    assert json.loads(gpuctl(bob, "--json", "jobs")[1]) == []
    for command in ("show", "cancel"):
        assert gpuctl(bob, command, str(alice_job)) == (1, "", f"gpuctl: error: no such job: {alice_job}\n")
    assert gpuctl(bob, "--workspace", "vision-lab", "jobs") == (1, "", "gpuctl: error: no such workspace: vision-lab\n")
    code, _, err = gpuctl(bob, "--workspace", "vision-lab", "submit", str(specs["seed"]))
    assert (code, err) == (1, "gpuctl: error: no such workspace: vision-lab\n")
    assert json.loads(gpuctl(tokens["alice"], "--json", "show", str(alice_job))[1])["state"] == "Pending"


def test_spec_errors_name_file_line_and_column_and_exit_2(gpuctl, tokens, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SEED_YAML.replace("MaxReplicas: 50", "MaxReplicas: 5"))
    code, out, err = gpuctl(tokens["alice"], "submit", str(bad))
    assert code == 2 and out == ""
    assert re.search(rf"^{re.escape(str(bad))}:8:\d+: MaxReplicas: .*less than MinReplicas", err, re.M), err
    code, _, err = gpuctl(tokens["alice"], "submit", "-", stdin=bad.read_text())
    assert code == 2 and re.search(r"^<stdin>:8:\d+: MaxReplicas: ", err, re.M), err
    assert json.loads(gpuctl(tokens["alice"], "--json", "jobs")[1]) == []


def test_submit_from_stdin(gpuctl, tokens):
    code, out, err = gpuctl(tokens["alice"], "--json", "submit", "-", stdin=CLEAN_YAML)
    assert code == 0, err
    assert json.loads(out)["name"] == "bert-finetune"


def test_revoked_expired_and_invalid_tokens_are_refused_in_one_line(gpuctl, tokens, cluster, live_daphne):
    """The server says why (its words may change); gpuctl prints them on one line with the whole URL
    of the tokens page, exit 1."""
    from datetime import timedelta

    from portal.models import ApiToken
    from portal.services import revoke_api_token
    from scheduling import clock

    page = re.escape(f"{live_daphne.url}/account/tokens/")

    def refused(token: str, why: str) -> None:
        code, out, err = gpuctl(token, "get", "jobs")
        assert (code, out) == (1, "") and err.count("\n") == 1, err
        assert re.fullmatch(rf"gpuctl: error: token refused: .*{why}.*{page}\n", err, re.I), err

    refused("gpt_not-a-real-token", "invalid")
    token = ApiToken.objects.get(user=cluster.alice)
    assert gpuctl(tokens["alice"], "jobs")[0] == 0
    revoke_api_token(cluster.alice, token.pk)
    refused(tokens["alice"], "revoked")
    ApiToken.objects.filter(user=cluster.bob).update(expires=clock.now() - timedelta(minutes=1))
    refused(tokens["bob"], "expired")


def test_a_read_only_token_may_look_but_not_cancel(gpuctl, cluster, specs, live_daphne):
    from portal.services import create_api_token

    submit_token = create_api_token(cluster.alice, "submit", scope="submit")[1]
    read_token = create_api_token(cluster.alice, "read", scope="read")[1]
    job_id = submit(gpuctl, submit_token, specs["clean"])
    assert gpuctl(read_token, "get", "jobs", "-o", "json")[0] == 0
    code, out, err = gpuctl(read_token, "cancel", str(job_id))
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert err.startswith("gpuctl: error: forbidden: ") and "scope" in err
    assert f"{live_daphne.url}/account/tokens/" in err
    assert json.loads(gpuctl(read_token, "--json", "show", str(job_id))[1])["state"] == "Pending"


def test_quote_lists_the_options_and_submit_takes_one(gpuctl, tokens, specs):
    alice = tokens["alice"]
    code, table, err = gpuctl(alice, "quote", str(specs["clean"]))
    assert code == 0, err
    lines = table.splitlines()
    assert lines[0] == f"quote for {specs['clean']} in vision-lab, USD, expected duration 2.00 h"
    assert lines[1].split()[:7] == ["ID", "SHARING", "VENDOR", "GPU", "MODEL", "POOL", "SPOT"]
    code, out, _ = gpuctl(alice, "--json", "quote", str(specs["clean"]))
    options = json.loads(out)["options"]
    assert code == 0 and options
    rows = {line.split()[0]: line.split() for line in lines[2:2 + len(options)]}
    assert set(rows) == {option["id"] for option in options}
    for option in options:  # the table shows the API's own figures; only the cheapest is starred
        row = rows[option["id"]]
        assert option["price_per_hour"] in row and option["price_per_hour_offpeak"] in row
        assert (row[-1] == "*") == option["cheapest"]
    cheapest = next(o["id"] for o in options if o["cheapest"])
    assert f"cheapest: {cheapest}  (gpuctl submit {specs['clean']} --option {cheapest})" in table

    # submit a costlier option than the cheapest one: the job freezes that option's quote
    chosen = next(o for o in options if not o["cheapest"])
    code, out, err = gpuctl(alice, "--json", "submit", str(specs["clean"]), "--option", chosen["id"])
    assert code == 0, err
    job = json.loads(out)
    assert job["quote"]["id"] == chosen["id"]
    code, out, _ = gpuctl(alice, "show", str(job["id"]))
    assert f"option {chosen['id']}, price/h {chosen['price_per_hour']} USD" in out.split("\nquote\n", 1)[1]

    code, out, err = gpuctl(alice, "submit", str(specs["clean"]), "--option", "no-such-pool.exclusive.now")
    assert (code, out) == (2, "") and err.startswith(f"{specs['clean']}: option: "), err


def test_quote_spec_errors_exit_2(gpuctl, tokens, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(CLEAN_YAML.replace("priority: 20", "priority: 200"))
    code, out, err = gpuctl(tokens["alice"], "quote", str(bad))
    assert code == 2 and out == "" and re.match(rf"{re.escape(str(bad))}:4:\d+: priority: ", err), err


def test_installed_console_script(live_daphne, tokens, specs, tmp_path):
    gpuctl = Path(sys.executable).parent / "gpuctl"
    env = {"HOME": str(tmp_path), "PATH": str(gpuctl.parent), "GPUCTL_URL": live_daphne.url,
           "GPUCTL_TOKEN": tokens["alice"], "GPUCTL_WORKSPACE": "vision-lab"}
    submitted = subprocess.run([str(gpuctl), "--json", "submit", "-"], input=SEED_YAML, env=env,
                               capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    listed = subprocess.run([str(gpuctl), "jobs", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [j["id"] for j in json.loads(listed.stdout)] == [json.loads(submitted.stdout)["id"]]
