"""The workspace's Secrets page (/w/<slug>/secrets/), linked from the workspace's page: owners add, replace and
delete secrets and registry credentials; members, viewers and finance see the names only; outsiders get a 404;
a value is never on the page, not even back in a form that had an error. The submit page says which credential
pulls the image."""

from __future__ import annotations

import pytest

from portal.console.models import AuditEntry
from scheduling import secrets
from scheduling.models import RegistryCredential, WorkspaceSecret

pytestmark = pytest.mark.django_db
PAGE = "/w/vision-lab/secrets/"
VALUE = "hf_s3cr3t-Value-0123456789"


def test_the_workspace_page_links_to_it(client, cluster):
    client.force_login(cluster.carol)
    assert f'href="{PAGE}"' in client.get("/w/vision-lab/").content.decode()


def test_an_owner_adds_replaces_and_deletes_a_secret(client, cluster, clock):
    client.force_login(cluster.alice)
    response = client.post(PAGE, {"action": "set-secret", "name": "hf-token", "value": VALUE})
    assert response.status_code == 302
    html = client.get(PAGE).content.decode()
    assert 'data-secret="hf-token"' in html and VALUE not in html and 'id="set-secret"' in html
    client.post(PAGE, {"action": "set-secret", "name": "hf-token", "value": "another-value"})
    assert secrets.decrypt(WorkspaceSecret.objects.get().ciphertext) == "another-value"
    client.post(PAGE, {"action": "delete-secret", "name": "hf-token"})
    assert not WorkspaceSecret.objects.exists()
    assert list(AuditEntry.objects.values_list("action", flat=True).order_by("id")) == ["create", "change", "delete"]


def test_a_refused_value_is_not_written_back_into_the_form(client, cluster):
    client.force_login(cluster.alice)
    response = client.post(PAGE, {"action": "set-secret", "name": "Bad_Name", "value": VALUE})
    html = response.content.decode()
    assert response.status_code == 400 and 'data-field="name"' in html and VALUE not in html
    response = client.post(PAGE, {"action": "set-secret", "name": "hf-token", "value": ""})
    assert response.status_code == 400 and 'data-field="value"' in response.content.decode()
    response = client.post(PAGE, {"action": "set-registry", "server": "bad host", "username": "u",
                                  "password": "pull-pass-77"})
    html = response.content.decode()
    assert response.status_code == 400 and 'data-field="server"' in html and "pull-pass-77" not in html
    assert not WorkspaceSecret.objects.exists() and not RegistryCredential.objects.exists()


def test_an_owner_adds_and_deletes_a_registry_credential(client, cluster):
    client.force_login(cluster.alice)
    client.post(PAGE, {"action": "set-registry", "server": "registry.example.com", "username": "robot",
                       "password": "pull-pass-77"})
    html = client.get(PAGE).content.decode()
    assert 'data-registry="registry.example.com"' in html and "robot" in html and "pull-pass-77" not in html
    client.post(PAGE, {"action": "delete-registry", "server": "registry.example.com"})
    assert not RegistryCredential.objects.exists()


@pytest.mark.parametrize("who", ["carol", "finance"])
def test_others_see_the_names_and_no_form_and_a_post_is_refused(client, cluster, who):
    secrets.set_secret(cluster.alice, cluster.vision, "hf-token", VALUE)
    client.force_login(getattr(cluster, who))
    html = client.get(PAGE).content.decode()
    assert 'data-secret="hf-token"' in html and 'id="read-only"' in html
    assert 'id="set-secret"' not in html and 'id="delete-secret-hf-token"' not in html and VALUE not in html
    assert client.post(PAGE, {"action": "delete-secret", "name": "hf-token"}).status_code == 403
    assert client.post(PAGE, {"action": "set-secret", "name": "x", "value": "y"}).status_code == 403
    assert WorkspaceSecret.objects.count() == 1


def test_an_outsider_gets_a_404(client, cluster):
    secrets.set_secret(cluster.alice, cluster.vision, "hf-token", VALUE)
    client.force_login(cluster.bob)
    assert client.get(PAGE).status_code == 404
    assert client.post(PAGE, {"action": "delete-secret", "name": "hf-token"}).status_code == 404
    assert 'data-secret="hf-token"' not in client.get("/w/nlp-group/secrets/").content.decode()


def test_the_submit_page_says_which_credential_pulls_the_image(client, cluster, clock):
    secrets.set_registry(cluster.alice, cluster.vision, "registry.example.com", "robot", "pull-pass-77")
    client.force_login(cluster.alice)
    spec = ("name: x\nqueue: vision-lab\nroles:\n  - name: main\n    image: registry.example.com/t/x:1\n"
            "    resources: {gpu: 1}\n    nodePool: h100\n")
    html = client.post("/submit/", {"workspace": "vision-lab", "spec": spec, "duration_hours": "1",
                                    "action": "quote"}).content.decode()
    assert 'data-credential="registry.example.com"' in html and "pull-pass-77" not in html
