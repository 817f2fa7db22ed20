"""The Submit page as a plain form: examples made for each workspace, clone and edit (scoped to the
caller's workspaces), quoting and submitting without JavaScript, bad input refused with 4xx; and the
image form's values read from a spec."""

import json
import re
from html import unescape

import pytest
from rest_framework.test import APIClient

from billing.services import submit_quoted_job
from portal.models import Membership, Role
from scheduling.models import Job
from scheduling.spec.examples import SEED_YAML

NOTEBOOK = """\
name: notebook
roles:
  - name: main
    image: jupyter/base:latest
    sharing: fraction
    resources: {gpu: 0.5, gpuMemory: 10Gi, cpu: 4, memory: 16Gi}
    gpuModel: A100-80GB
"""


def examples_on(html: str) -> dict[str, str]:
    found = re.search(r'<script id="submit-examples" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(found.group(1))


def textarea(html: str) -> str:
    return unescape(re.search(r'<textarea id="spec-yaml"[^>]*>(.*?)</textarea>', html, re.S).group(1))


def test_examples_are_made_for_each_workspace_and_quote_as_they_are(client, cluster, clock):
    for user, mine, other in [(cluster.alice, "vision-lab", "nlp-group"), (cluster.bob, "nlp-group", "vision-lab")]:
        client.force_login(user)
        examples = examples_on(client.get("/submit/").content.decode())
        assert list(examples) == ["single", "clean", "spare", "seed"]
        assert f"queue: {mine}" in examples["single"] and f"queue: {mine}" in examples["clean"]
        assert "queue: community" in examples["spare"]
        assert not any(other in text for text in examples.values())
        assert 'env: {EPOCHS: "3"}' in examples["clean"]  # the text itself, not HTML-escaped
        api = APIClient()
        api.force_authenticate(user)
        for key, text in examples.items():
            response = api.post("/api/v1/quotes/", {"workspace": mine, "spec": text}, format="json")
            assert response.status_code == 200, (mine, key, response.json())


def test_an_example_is_prefilled_and_quoted_without_javascript(client, cluster, clock):
    client.force_login(cluster.alice)
    html = client.get("/submit/?example=clean").content.decode()
    assert textarea(html).startswith("name: bert-finetune") and "queue: vision-lab" in textarea(html)
    assert 'data-option="a100-spot.fraction.now"' in html and "assuming 2 h" in html
    assert 'class="badge flag-cheapest"' in html and 'class="badge flag-earliest"' in html
    assert client.get("/submit/?example=nope").status_code == 404


def test_clone_and_edit_starts_from_the_jobs_spec_and_workspace(client, cluster, clock):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK, duration_hours=3)
    client.force_login(cluster.alice)
    html = client.get(f"/submit/?from={job.pk}").content.decode()
    assert textarea(html) == NOTEBOOK
    assert 'name="workspace" value="vision-lab"' in html and f'href="/jobs/{job.pk}/"' in html
    assert 'id="duration-hours" name="duration_hours" type="number" min="0.01" max="2160" step="any" value="3"' in html
    assert "assuming 3 h" in html and 'data-option="a100-spot.fraction.now"' in html

    for user in (cluster.bob, cluster.admin):  # another tenant's job; an operator is no member either
        client.force_login(user)
        response = client.get(f"/submit/?from={job.pk}")
        assert response.status_code == 404 and "jupyter/base" not in response.content.decode()  # nothing of its spec
    for bad in ("abc", "", "99999", "-1"):
        assert client.get(f"/submit/?from={bad}").status_code == 404
    client.force_login(cluster.alice)
    long_job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK, duration_hours=10)
    assert 'step="any" value="10"' in client.get(f"/submit/?from={long_job.pk}").content.decode()


def test_a_clone_goes_to_the_jobs_workspace_not_the_current_one(client, cluster, clock):
    Membership.objects.create(user=cluster.alice, workspace=cluster.nlp, role=Role.MEMBER)
    job = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=NOTEBOOK)
    client.force_login(cluster.alice)
    session = client.session
    session["workspace"] = "vision-lab"
    session.save()
    html = client.get(f"/submit/?from={job.pk}").content.decode()
    assert 'name="workspace" value="nlp-group"' in html and "NLP Group" in html
    # a role that may not submit sees the spec's page say so, with nothing to submit
    client.force_login(cluster.finance)
    html = client.get(f"/submit/?from={job.pk}").content.decode()
    assert 'id="may-not-submit"' in html and 'id="submit-form"' not in html


def test_quote_then_submit_an_option_without_javascript(client, cluster, clock):
    client.force_login(cluster.alice)
    form = {"workspace": "vision-lab", "spec": NOTEBOOK.replace("\n", "\r\n"), "duration_hours": "3"}
    quoted = client.post("/submit/", form)
    assert quoted.status_code == 200
    html = quoted.content.decode()
    assert 'data-option="a100-spot.fraction.now"' in html and "assuming 3 h" in html
    assert '<button type="submit" name="option" value="a100-spot.fraction.now"' in html
    assert not Job.objects.exists()

    response = client.post("/submit/", {**form, "option": "a100-spot.fraction.now"})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.spec_text == NOTEBOOK  # as typed, the browser's CRLF made LF again
    assert (job.quote["id"], job.expected_duration_s, job.quote["total"]) == ("a100-spot.fraction.now", 3 * 3600, "1.27")


@pytest.mark.parametrize(("change", "field"), [
    ({"duration_hours": "0"}, "duration_hours"),
    ({"duration_hours": "abc"}, "duration_hours"),
    ({"duration_hours": "5000"}, "duration_hours"),
    ({"spec": ""}, "spec"),
    ({"option": "x" * 300}, "option"),
])
def test_bad_form_input_is_a_400_beside_its_field_and_nothing_is_submitted(client, cluster, clock, change, field):
    client.force_login(cluster.alice)
    form = {"workspace": "vision-lab", "spec": NOTEBOOK, "duration_hours": "2", "option": "a100-spot.fraction.now"}
    response = client.post("/submit/", {**form, **change})
    assert response.status_code == 400
    assert f'data-field="{field}"' in response.content.decode()
    assert not Job.objects.exists()


def test_spec_errors_come_back_with_their_line_and_a_bad_option_is_refused(client, cluster, clock):
    client.force_login(cluster.alice)
    response = client.post("/submit/", {"workspace": "vision-lab", "spec": "name: x\npriority: 500\nroles: []\n"})
    html = response.content.decode()
    assert response.status_code == 400 and 'data-line="2" data-column="11"' in html
    assert "line 2, col 11" in html
    yaml_error = client.post("/submit/", {"workspace": "vision-lab", "spec": "a: [1, 2\n"}).content.decode()
    assert "YAML syntax: the list opened here with &#x27;[&#x27; is not closed" in yaml_error
    assert "&lt;stream end&gt;" not in yaml_error and "while parsing" not in yaml_error
    response = client.post("/submit/", {"workspace": "vision-lab", "spec": NOTEBOOK, "option": "nope.exclusive.now"})
    assert response.status_code == 400 and "unknown quote option" in response.content.decode()
    assert not Job.objects.exists()


def test_posting_to_another_tenants_workspace_or_without_the_right_role(client, cluster, clock):
    client.force_login(cluster.alice)
    form = {"workspace": "nlp-group", "spec": NOTEBOOK, "option": "a100-spot.fraction.now"}
    assert client.post("/submit/", form).status_code == 404
    client.force_login(cluster.finance)  # a member of both, who may not submit
    assert client.post("/submit/", {**form, "workspace": "vision-lab"}).status_code == 403
    assert not Job.objects.exists()


def test_the_image_form_follows_a_spec(cluster):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    url = "/api/v1/specs/image-form/values/"
    body = api.post(url, {"workspace": "vision-lab", "spec": NOTEBOOK + "expectedDuration: 90m\n"}, format="json")
    assert body.status_code == 200, body.json()
    data = body.json()
    assert data["form"]["image"] == "jupyter/base:latest" and data["form"]["gpus"] == "0.5"
    assert (data["form"]["sharing"], data["form"]["gpuMemory"], data["duration_hours"]) == ("fraction", "10Gi", "1.5")
    assert data["not_in_form"] == []
    # the form's YAML read back gives the same form
    yaml = api.post("/api/v1/specs/image-form/", {"workspace": "vision-lab", "form": data["form"]},
                    format="json").json()["yaml"]
    assert api.post(url, {"workspace": "vision-lab", "spec": yaml}, format="json").json()["form"] == data["form"]

    two_roles = api.post(url, {"workspace": "vision-lab", "spec": SEED_YAML}, format="json").json()
    assert "2 roles" in two_roles["not_in_form"] and two_roles["duration_hours"] is None
    bad = api.post(url, {"workspace": "vision-lab", "spec": "name: x\npriority: 500\n"}, format="json")
    assert bad.status_code == 400 and 2 in [e["line"] for e in bad.json()["errors"]]
    bob = APIClient()
    bob.force_authenticate(cluster.bob)
    assert bob.post(url, {"workspace": "vision-lab", "spec": NOTEBOOK}, format="json").status_code == 404
