"""The notebook proxy on the real ASGI server, in front of a real notebook process of the simulated cluster.
The portal's `/nb/` sends a member to the notebook's own host with a ticket; there, members reach it with
the host's cookie and never see its token; another tenant gets a 404, a viewer a 403, a stranger the login
page; writes need the notebook host's own Origin; no cookie reaches the notebook; a stopped notebook says
so."""

from __future__ import annotations

import httpx
import pytest
from django.conf import settings

from portal.notebook_origin import COOKIE_NAME
from scheduling import services
from scheduling.notebooks import notebook_token
from tests.portal.notebook_host import local_path, on_host, open_from_portal, origin_of

pytestmark = pytest.mark.django_db(transaction=True)


def session(client, user) -> dict[str, str]:
    client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def test_members_open_the_notebook_on_its_own_host(live_daphne, cluster, running_notebook, client):
    job_id = running_notebook.pk
    with httpx.Client(cookies=session(client, cluster.alice)) as alice:
        sent = alice.get(f"{live_daphne.url}/nb/vision-lab/lab/lab", params={"token": "not-the-token"})
        assert sent.status_code == 302 and sent.headers["cache-control"] == "no-store"
        link = sent.headers["location"]
        assert link.startswith(origin_of(live_daphne, job_id) + "/_ticket?ticket=")
        assert "not-the-token" not in link and "next=%2Fnb%2Fvision-lab%2Flab%2Flab" in link
    with on_host(live_daphne, job_id) as host:
        exchanged = host.get(local_path(link))
        assert exchanged.status_code == 302 and exchanged.headers["location"] == "/nb/vision-lab/lab/lab"
        set_cookie = exchanged.headers["set-cookie"]
        assert "HttpOnly" in set_cookie and "SameSite=Lax" in set_cookie and "Path=/" in set_cookie
        assert "Domain" not in set_cookie and exchanged.headers["referrer-policy"] == "no-referrer"
        cookie = exchanged.cookies[COOKIE_NAME]
        assert host.get(local_path(link)).status_code == 403, "a ticket opens once"

    with on_host(live_daphne, job_id, cookie) as host:
        page = host.get("/nb/vision-lab/lab/lab")
        assert page.status_code == 200, page.text
        assert "<h1>lab</h1>" in page.text and "JupyterLab (simulated) on 0.5 GPU" in page.text
        assert notebook_token(job_id) not in page.text + str(page.headers)
        assert "set-cookie" not in page.headers and "private" in page.headers["cache-control"]
        assert host.get("/").headers["location"] == "/nb/vision-lab/lab/"

        assert host.get("/nb/vision-lab/lab/api/status").json()["kernels"] == 0
        own = origin_of(live_daphne, job_id)
        assert host.put("/nb/vision-lab/lab/api/contents/notes.txt", json={"content": "x"}).status_code == 403
        for other in (live_daphne.url, origin_of(live_daphne, job_id + 1), "https://evil.example"):
            refused = host.put("/nb/vision-lab/lab/api/contents/notes.txt", json={"content": "x"},
                               headers={"Origin": other})
            assert refused.status_code == 403, other
        saved = host.put("/nb/vision-lab/lab/api/contents/notes.txt", json={"content": "from its page"},
                         headers={"Origin": own})
        assert saved.status_code == 200, saved.text
        assert host.get("/nb/vision-lab/lab/api/contents/notes.txt").json()["content"] == "from its page"
        kernel = host.post("/nb/vision-lab/lab/api/kernels", json={"name": "python3"}, headers={"Origin": own})
        assert kernel.status_code == 201 and kernel.json()["execution_state"] == "idle"

    with httpx.Client(cookies=session(client, cluster.carol)) as carol:  # another member of vision-lab
        carols = open_from_portal(live_daphne, carol, job_id)
    with on_host(live_daphne, job_id, carols) as host:
        assert host.get("/nb/vision-lab/lab/lab").status_code == 200


def test_other_tenants_viewers_and_strangers_do_not_get_in(live_daphne, cluster, running_notebook, client):
    url = f"{live_daphne.url}/nb/vision-lab/lab/lab"
    with httpx.Client(cookies=session(client, cluster.bob)) as bob:
        for method in ("GET", "HEAD"):
            response = bob.request(method, url)
            assert response.status_code == 404, (method, response.status_code)
            assert "location" not in response.headers
        assert bob.get(f"{live_daphne.url}/nb/nlp-group/lab/lab").status_code == 404  # his own workspace: none
    with httpx.Client(cookies=session(client, cluster.finance)) as finance:  # a viewer of vision-lab
        assert finance.get(url).status_code == 403
    stranger = httpx.get(url)
    assert stranger.status_code == 302 and "/login/" in stranger.headers["location"]
    with on_host(live_daphne, running_notebook.pk) as nobody:  # no cookie of the host
        page = nobody.get("/nb/vision-lab/lab/lab")
        assert page.status_code == 403 and "JupyterLab" not in page.text


def test_the_portals_session_opens_nothing_on_a_notebooks_host(live_daphne, cluster, running_notebook, client):
    portal_cookies = session(client, cluster.alice)
    with on_host(live_daphne, running_notebook.pk, cookies=portal_cookies) as host:
        page = host.get("/nb/vision-lab/lab/lab")
        assert page.status_code == 403 and "JupyterLab" not in page.text
        for path in ("/api/v1/workspaces/", "/", "/notebooks/", "/admin/", "/metrics", "/healthz",
                     "/nb/vision-lab/lab/api/status"):
            answer = host.get(path)
            assert answer.status_code == 403, (path, answer.status_code)
            assert answer.headers["content-type"].startswith("text/html"), path
            assert "vision-lab" not in answer.text and "set-cookie" not in answer.headers, path
    cookie = open_from_portal(live_daphne, httpx.Client(cookies=portal_cookies), running_notebook.pk)
    with on_host(live_daphne, running_notebook.pk, cookies={**portal_cookies, COOKIE_NAME: cookie}) as host:
        for path in ("/api/v1/workspaces/", "/notebooks/", "/admin/", "/static/portal.css"):
            answer = host.get(path)
            assert answer.status_code == 404 and "No such notebook" in answer.text, path


def test_the_portal_refuses_what_a_notebooks_page_sends(live_daphne, cluster, running_notebook, client):
    with httpx.Client(cookies=session(client, cluster.alice)) as alice:
        assert alice.get(f"{live_daphne.url}/api/v1/workspaces/").status_code == 200
        from_notebook = alice.get(f"{live_daphne.url}/api/v1/workspaces/",
                                  headers={"Origin": origin_of(live_daphne, running_notebook.pk)})
    assert from_notebook.status_code == 403 and "vision-lab" not in from_notebook.text


def test_a_stopped_notebook_cannot_be_opened(live_daphne, cluster, running_notebook, client):
    with httpx.Client(cookies=session(client, cluster.alice)) as alice:
        cookie = open_from_portal(live_daphne, alice, running_notebook.pk)
        services.stop_workload(cluster.alice, running_notebook, "")
        page = alice.get(f"{live_daphne.url}/nb/vision-lab/lab/lab")
    assert page.status_code == 503 and "It is Stopped" in page.text
    with on_host(live_daphne, running_notebook.pk, cookie) as host:
        page = host.get("/nb/vision-lab/lab/lab")
    assert page.status_code == 503 and "It is Stopped" in page.text
