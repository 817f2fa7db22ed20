"""The notebook proxy on the real ASGI server, in front of a real notebook process of the simulated cluster:
members of the notebook's workspace reach it with their session and never see its token; another tenant
gets a 404, a viewer a 403, a stranger the login page; writes need the portal's own Origin; the portal's
cookies never reach the notebook; a stopped notebook says so."""

from __future__ import annotations

import httpx
import pytest
from django.conf import settings

from scheduling import services
from scheduling.notebooks import notebook_token

pytestmark = pytest.mark.django_db(transaction=True)


def session(client, user) -> dict[str, str]:
    client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def test_members_open_the_notebook_through_the_portal(live_daphne, cluster, running_notebook, client):
    url = f"{live_daphne.url}/nb/vision-lab/lab/"
    with httpx.Client(cookies=session(client, cluster.alice)) as alice:
        page = alice.get(url + "lab", params={"token": "not-the-token"})
        assert page.status_code == 200, page.text
        assert "<h1>lab</h1>" in page.text and "JupyterLab (simulated) on 0.5 GPU" in page.text
        assert notebook_token(running_notebook.pk) not in page.text + str(page.headers)
        assert "set-cookie" not in page.headers and "private" in page.headers["cache-control"]
        assert page.headers["content-security-policy"]  # the portal's own CSP covers what the notebook serves

        status = alice.get(url + "api/status").json()
        assert status["kernels"] == 0
        refused = alice.put(url + "api/contents/notes.txt", json={"content": "x"})  # no Origin: not from our pages
        assert refused.status_code == 403
        forged = alice.put(url + "api/contents/notes.txt", json={"content": "x"},
                           headers={"Origin": "https://evil.example"})
        assert forged.status_code == 403
        saved = alice.put(url + "api/contents/notes.txt", json={"content": "from the portal"},
                          headers={"Origin": live_daphne.url})
        assert saved.status_code == 200, saved.text
        assert alice.get(url + "api/contents/notes.txt").json()["content"] == "from the portal"
        kernel = alice.post(url + "api/kernels", json={"name": "python3"}, headers={"Origin": live_daphne.url})
        assert kernel.status_code == 201 and kernel.json()["execution_state"] == "idle"

    with httpx.Client(cookies=session(client, cluster.carol)) as carol:  # another member of vision-lab
        assert carol.get(url + "lab").status_code == 200


def test_other_tenants_viewers_and_strangers_do_not_get_in(live_daphne, cluster, running_notebook, client):
    url = f"{live_daphne.url}/nb/vision-lab/lab/lab"
    with httpx.Client(cookies=session(client, cluster.bob)) as bob:
        for method in ("GET", "POST", "DELETE"):
            response = bob.request(method, url, headers={"Origin": live_daphne.url})
            assert response.status_code == 404, (method, response.status_code)
            assert "JupyterLab" not in response.text
        assert bob.get(f"{live_daphne.url}/nb/nlp-group/lab/lab").status_code == 404  # his own workspace: none
    with httpx.Client(cookies=session(client, cluster.finance)) as finance:  # a viewer of vision-lab
        assert finance.get(url).status_code == 403
    stranger = httpx.get(url)
    assert stranger.status_code == 302 and "/login/" in stranger.headers["location"]


def test_a_stopped_notebook_cannot_be_opened(live_daphne, cluster, running_notebook, client):
    services.stop_workload(cluster.alice, running_notebook, "")
    with httpx.Client(cookies=session(client, cluster.alice)) as alice:
        page = alice.get(f"{live_daphne.url}/nb/vision-lab/lab/lab")
    assert page.status_code == 503 and "It is Stopped" in page.text
