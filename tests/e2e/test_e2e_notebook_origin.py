"""A notebook's page cannot use the portal's session, in a real browser.

Alice's notebook serves an HTML file a member put in its home (a real Jupyter serves one the same way, and
runs a notebook's HTML outputs in its own page). Alice opens it from the portal: it is served on the
notebook's own host (`<id>.nb.localhost`), and its script tries what such a script would: read the portal's
API with her session, post to it, read her cookies, open the portal's websocket. Everything fails. With
the portal on 127.0.0.1 (another site) the browser sends it no session at all; with the portal on
`portal.nb.localhost` (the same site as `<id>.nb.localhost`, as `gpu.example.org` is for
`<id>.nb.example.org`) the browser sends the session cookie (SameSite=Lax allows it) and the portal
refuses the request for its notebook Origin. Either way nothing changes on the portal."""

import dataclasses
import json

import httpx
import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, wait_for

from billing.services import submit_quoted_job
from portal.models import ApiToken
from scheduling.api import endpoint_of, get_backend
from scheduling.models import Job, JobState
from tests.world import PASSWORDS

NOTEBOOK = "kind: notebook\nname: lab\nqueue: vision-lab\nresources: {gpu: 0.5, gpuMemory: 10Gi}\n"

EVIL = """<!doctype html><html><head><title>evil</title></head><body><pre id="out">running</pre>
<script>
const portal = %(portal)s;
const results = {cookie: document.cookie};
async function probe(name, url, options) {
  try {
    const answer = await fetch(url, Object.assign({credentials: "include"}, options || {}));
    results[name] = "read " + answer.status + " " + (await answer.text()).slice(0, 200);
  } catch (error) {
    results[name] = "blocked";
  }
}
function socket(url) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    ws.onopen = () => { ws.close(); resolve("opened"); };
    ws.onerror = () => resolve("blocked");
  });
}
(async () => {
  await probe("workspaces", portal + "/api/v1/workspaces/");
  await probe("me", portal + "/api/v1/me/");
  await probe("token", portal + "/api/v1/tokens/", {method: "POST", headers: {"Content-Type": "text/plain"},
                                                     body: JSON.stringify({name: "stolen"})});
  await probe("form", portal + "/account/tokens/", {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "name=stolen"});
  results.websocket = await socket(portal.replace("http", "ws") + "/ws/workspaces/vision-lab/");
  document.getElementById("out").textContent = JSON.stringify(results);
  document.title = "done";
})();
</script></body></html>"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("portal_host", ["127.0.0.1", "portal.nb.localhost"])
def test_a_notebooks_script_cannot_use_the_portals_session(live_daphne, cluster, page, scheduler_running,
                                                           portal_host):
    portal = dataclasses.replace(live_daphne, url=live_daphne.url.replace("127.0.0.1", portal_host))
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING)
    endpoint = endpoint_of(Job.objects.get(pk=job.pk), get_backend())
    put = httpx.put(endpoint.url + "api/contents/evil.html", headers={"Authorization": f"token {endpoint.token}"},
                    json={"content": EVIL % {"portal": json.dumps(portal.url)}})
    assert put.status_code == 200, put.text

    login(page, portal, "alice", PASSWORDS["alice"])
    sent_to_portal = []
    page.context.on("request", lambda request: sent_to_portal.append(request)
                    if request.url.startswith(portal.url) and request.resource_type == "fetch" else None)
    tokens_before = ApiToken.objects.count()

    page.goto(f"{portal.url}/nb/vision-lab/lab/files/evil.html")
    expect(page).to_have_title("done", timeout=30000)
    notebook_origin = live_daphne.notebook_origin.replace("{id}", str(job.pk))
    assert page.url == f"{notebook_origin}/nb/vision-lab/lab/files/evil.html"  # the ticket is gone from it
    results = json.loads(page.locator("#out").text_content())
    assert results == {"cookie": "", "workspaces": "blocked", "me": "blocked", "token": "blocked",
                       "form": "read 0 ", "websocket": "blocked"}, results
    assert ApiToken.objects.count() == tokens_before
    assert sent_to_portal, "the script's requests were seen"
    session_sent = ["sessionid=" in (request.all_headers().get("cookie") or "") for request in sent_to_portal]
    if portal_host == "127.0.0.1":  # another site: the browser sends the portal's session nowhere
        assert not any(session_sent)
    else:  # the same site: the cookie goes, and the portal refuses what a notebook's page sends
        assert any(session_sent)
        for request in sent_to_portal:
            response = request.response()
            assert response is None or response.status in (403, 0), (request.url, response and response.status)

    page.goto(f"{portal.url}/api/v1/workspaces/")  # the portal's own pages keep working for her
    assert "vision-lab" in page.content()
