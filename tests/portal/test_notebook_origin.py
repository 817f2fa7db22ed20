"""Notebooks' own origin (portal/notebook_origin.py), in process: the host names, the ticket (bound to the
user, the notebook and its port; minutes long; once), the host's cookie, membership checked again on
every request, and the portal's cookies kept host-only. The live server's side is in test_notebook_proxy.py
and test_notebook_socket_proxy.py; a browser's in tests/e2e/test_e2e_notebook_origin.py."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from billing.services import submit_quoted_job
from portal import notebook_origin
from portal.notebook_origin import COOKIE_NAME, NOTEBOOK_PORT, issue_ticket, parse_host, session_cookie
from tests.portal.conftest import NOTEBOOK

pytestmark = pytest.mark.django_db


@pytest.fixture
def notebooks(cluster):
    """Two notebooks of vision-lab (A and B) and one of nlp-group."""
    a = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    b = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK.replace("name: lab", "name: b"))
    nlp = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=NOTEBOOK.replace("queue: vision-lab",
                                                                                           "queue: nlp-group"))
    return a, b, nlp


def host(job_id: int, port: int = NOTEBOOK_PORT) -> str:
    return f"{notebook_origin.label(job_id, port)}.nb.localhost:8001"


def exchange(ticket: str, job_id: int, next_: str = "/nb/vision-lab/lab/", port: int = NOTEBOOK_PORT):
    return Client().get("/_ticket", {"ticket": ticket, "next": next_}, HTTP_HOST=host(job_id, port))


def test_the_hosts_of_the_origin():
    assert parse_host("7.nb.localhost:8001") == (7, NOTEBOOK_PORT)
    assert parse_host("7-6006.NB.localhost:8001") == (7, 6006)
    for other in ("127.0.0.1:8001", "localhost:8001", "7.nb.localhost", "7.nb.localhost:8000", "nb.localhost:8001",
                  "a.7.nb.localhost:8001", "07.nb.localhost:8001", "x.nb.localhost:8001", "7.nb.localhost.evil:8001",
                  "7.xnb.localhost:8001", "", None):
        assert parse_host(other) is None, other
    assert notebook_origin.origin_of(7) == "http://7.nb.localhost:8001"


def test_a_template_without_its_id_label_is_refused(settings):
    for template in ("https://nb.example.org", "https://x{id}.example.org", "https://{id}.example.org/path",
                     "ftp://{id}.example.org", "https://{id}"):
        settings.NOTEBOOK_ORIGIN = template
        with pytest.raises(ImproperlyConfigured):
            notebook_origin.origin()
    settings.NOTEBOOK_ORIGIN = "https://{id}.nb.example.org"
    assert parse_host("7.nb.example.org") == (7, NOTEBOOK_PORT) and parse_host("7.nb.example.org:443")
    assert parse_host("7.nb.example.org:8001") is None and notebook_origin.origin().secure


def test_the_portals_cookies_stay_host_only(settings):
    notebook_origin.check_cookie_domains()
    settings.SESSION_COOKIE_DOMAIN = ".example.org"
    with pytest.raises(ImproperlyConfigured, match="SESSION_COOKIE_DOMAIN"):
        notebook_origin.check_cookie_domains()


def test_the_portal_hands_a_member_a_ticket_for_the_notebooks_host(cluster, notebooks, client):
    a, _, _ = notebooks
    client.force_login(cluster.alice)
    sent = client.get("/nb/vision-lab/lab/tree/x.ipynb?kernel=1")
    # not running: the portal says so
    assert sent.status_code == 503
    url = notebook_origin.ticket_url(cluster.alice, a, path="/nb/vision-lab/lab/tree/x.ipynb", query="kernel=1")
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == f"http://{a.pk}.nb.localhost:8001" and parts.path == "/_ticket"
    query = parse_qs(parts.query)
    exchanged = exchange(query["ticket"][0], a.pk, query["next"][0])
    assert exchanged.status_code == 302 and exchanged["Location"] == "/nb/vision-lab/lab/tree/x.ipynb?kernel=1"
    morsel = exchanged.cookies[COOKIE_NAME]
    assert morsel["httponly"] and morsel["samesite"] == "Lax" and morsel["path"] == "/" and not morsel["domain"]
    assert not morsel["secure"]  # http in make run; https sets Secure
    assert notebook_origin.user_of_cookie(morsel.value, a.pk, NOTEBOOK_PORT) == cluster.alice


def test_a_next_outside_the_notebook_goes_to_its_home(cluster, notebooks):
    a, _, _ = notebooks
    for next_ in ("https://evil.example/", "//evil.example/", "/nb/vision-lab/b/", "/api/v1/workspaces/",
                  "/nb/vision-lab/lab/\\\\evil.example"):
        exchanged = exchange(issue_ticket(cluster.alice, a.pk), a.pk, next_)
        assert exchanged.status_code == 302 and exchanged["Location"] == "/nb/vision-lab/lab/", next_


def test_a_ticket_opens_its_own_notebook_only(cluster, notebooks):
    a, b, _ = notebooks
    ticket = issue_ticket(cluster.alice, a.pk)
    on_b = exchange(ticket, b.pk, "/nb/vision-lab/b/")
    assert on_b.status_code == 403 and COOKIE_NAME not in on_b.cookies
    on_other_port = exchange(ticket, a.pk, port=6006)
    assert on_other_port.status_code == 403 and COOKIE_NAME not in on_other_port.cookies
    cookie_of_a = exchange(ticket, a.pk).cookies[COOKIE_NAME].value  # still unused: it opens A
    assert notebook_origin.user_of_cookie(cookie_of_a, b.pk, NOTEBOOK_PORT) is None
    b_page = Client(HTTP_HOST=host(b.pk)).get("/nb/vision-lab/b/", HTTP_COOKIE=f"{COOKIE_NAME}={cookie_of_a}")
    assert b_page.status_code == 403


def test_a_ticket_is_used_once(cluster, notebooks):
    a, _, _ = notebooks
    ticket = issue_ticket(cluster.alice, a.pk)
    assert exchange(ticket, a.pk).status_code == 302
    again = exchange(ticket, a.pk)
    assert again.status_code == 403 and COOKIE_NAME not in again.cookies


def test_an_expired_ticket_and_cookie_are_refused(cluster, notebooks, clock, settings):
    a, _, _ = notebooks
    late = issue_ticket(cluster.alice, a.pk)
    in_time = issue_ticket(cluster.alice, a.pk)
    clock.advance(settings.NOTEBOOK_TICKET_SECONDS)
    exchanged = exchange(in_time, a.pk)
    assert exchanged.status_code == 302
    clock.advance(1)
    assert exchange(late, a.pk).status_code == 403
    cookie = exchanged.cookies[COOKIE_NAME].value
    assert notebook_origin.user_of_cookie(cookie, a.pk, NOTEBOOK_PORT) == cluster.alice
    clock.advance(settings.NOTEBOOK_SESSION_SECONDS)
    assert notebook_origin.user_of_cookie(cookie, a.pk, NOTEBOOK_PORT) is None


def test_a_forged_or_other_tenants_ticket_opens_nothing(cluster, notebooks):
    a, _, nlp = notebooks
    assert exchange("not-a-ticket", a.pk).status_code == 403
    assert exchange(issue_ticket(cluster.alice, a.pk) + "x", a.pk).status_code == 403
    bobs = exchange(issue_ticket(cluster.bob, a.pk), a.pk)  # signed for bob, who is not of vision-lab
    assert bobs.status_code == 404 and COOKIE_NAME not in bobs.cookies
    viewer = exchange(issue_ticket(cluster.finance, a.pk), a.pk)  # finance only views vision-lab
    assert viewer.status_code == 403 and COOKIE_NAME not in viewer.cookies
    alices = exchange(issue_ticket(cluster.alice, nlp.pk), nlp.pk, "/nb/nlp-group/lab/")  # not hers
    assert alices.status_code == 404 and COOKIE_NAME not in alices.cookies


def test_membership_is_checked_on_every_request(cluster, notebooks):
    from portal.models import Membership

    a, _, _ = notebooks
    carol = Client(HTTP_HOST=host(a.pk))
    carol.cookies[COOKIE_NAME] = session_cookie(cluster.carol, a.pk, NOTEBOOK_PORT)
    assert carol.get("/nb/vision-lab/lab/").status_code == 503  # in: the notebook is not running yet
    Membership.objects.filter(user=cluster.carol, workspace=cluster.vision).delete()
    assert carol.get("/nb/vision-lab/lab/").status_code == 404


def test_a_password_change_ends_the_hosts_cookie(cluster, notebooks):
    a, _, _ = notebooks
    cookie = session_cookie(cluster.alice, a.pk, NOTEBOOK_PORT)
    cluster.alice.set_password("another-long-password")
    cluster.alice.save()
    assert notebook_origin.user_of_cookie(cookie, a.pk, NOTEBOOK_PORT) is None


def test_the_notebooks_host_never_serves_the_portal(cluster, notebooks):
    a, _, _ = notebooks
    signed_in = Client(HTTP_HOST=host(a.pk))
    signed_in.force_login(cluster.alice)  # the portal's session cookie, sent to the notebook's host
    for path in ("/api/v1/workspaces/", "/", "/login/", "/admin/", "/metrics", "/nb/vision-lab/lab/"):
        answer = signed_in.get(path)
        assert answer.status_code == 403 and answer["Content-Type"].startswith("text/html"), path
        assert b"Open this notebook from the portal" in answer.content, path
    signed_in.cookies[COOKIE_NAME] = session_cookie(cluster.alice, a.pk, NOTEBOOK_PORT)
    for path in ("/api/v1/workspaces/", "/notebooks/", "/admin/"):
        assert signed_in.get(path).status_code == 404, path


def test_the_ticket_is_not_logged(cluster, notebooks, caplog):
    a, _, _ = notebooks
    ticket = issue_ticket(cluster.alice, a.pk)
    with caplog.at_level("INFO", logger="portal.requests"):
        assert exchange(ticket, a.pk).status_code == 302
    lines = [r.getMessage() for r in caplog.records if r.name == "portal.requests"]
    assert any("/_ticket?ticket=[redacted]&next=" in line for line in lines), lines
    assert ticket not in caplog.text
