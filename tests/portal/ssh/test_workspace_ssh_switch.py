"""A workspace owner turns SSH off and on, from the workspace page and with PATCH /api/v1/workspaces/<slug>/;
members are refused (403) and another tenant sees nothing (404), nothing changing; each change is one audit line
(source: workspace pages); the gateway's decision follows the switch."""

from __future__ import annotations

import pytest

from portal.console.models import AuditEntry

pytestmark = pytest.mark.django_db

API = "/api/v1/workspaces/vision-lab/"
PAGE, SWITCH = "/w/vision-lab/", "/w/vision-lab/ssh/"


def ssh_enabled(cluster) -> bool:
    cluster.vision.refresh_from_db()
    return cluster.vision.ssh_enabled


def switch_lines():
    return list(AuditEntry.objects.filter(target_type="portal.workspace", action="change")
                .values_list("username", "source", "changes"))


def test_an_owner_turns_ssh_off_and_on_through_the_api(cluster, api_as):
    alice = api_as(cluster.alice)
    assert alice.get(API).json()["ssh_enabled"] is True
    off = alice.patch(API, {"ssh_enabled": False}, format="json")
    assert off.status_code == 200, off.content
    assert off.json()["ssh_enabled"] is False and not ssh_enabled(cluster)
    assert alice.patch(API, {"ssh_enabled": False}, format="json").status_code == 200   # no change: no line
    assert alice.patch(API, {"ssh_enabled": True}, format="json").json()["ssh_enabled"] is True
    assert switch_lines() == [("alice", "tenant", {"ssh_enabled": [False, True]}),
                              ("alice", "tenant", {"ssh_enabled": [True, False]})]


def test_a_member_gets_a_403_an_outsider_a_404_and_bad_input_a_400_changing_nothing(cluster, api_as):
    member = api_as(cluster.carol).patch(API, {"ssh_enabled": False}, format="json")
    assert member.status_code == 403 and member["Content-Type"] == "application/problem+json"
    assert "only an owner of vision-lab turns SSH on or off" in member.content.decode()
    assert api_as(cluster.bob).patch(API, {"ssh_enabled": False}, format="json").status_code == 404
    assert api_as(cluster.finance).patch(API, {"ssh_enabled": False}, format="json").status_code == 403
    bad = api_as(cluster.alice).patch(API, {"ssh_enabled": "maybe"}, format="json")
    assert bad.status_code == 400 and bad["Content-Type"] == "application/problem+json"
    assert api_as(cluster.alice).patch(API, {}, format="json").status_code == 400
    assert ssh_enabled(cluster) and switch_lines() == []


def test_the_owner_switches_it_on_the_workspace_page_and_only_the_owner_sees_the_switch(cluster, client):
    client.force_login(cluster.alice)
    page = client.get(PAGE).content.decode()
    assert 'id="ssh-switch"' in page and "Turn SSH off" in page
    done = client.post(SWITCH, {"ssh_enabled": "0"})
    assert done.status_code == 302 and done["Location"] == PAGE + "#ssh"
    assert not ssh_enabled(cluster)
    page = client.get(PAGE).content.decode()
    assert "is turned off" in page and "Turn SSH on" in page
    client.post(SWITCH, {"ssh_enabled": "1"})
    assert ssh_enabled(cluster) and len(switch_lines()) == 2

    client.force_login(cluster.carol)
    assert 'id="ssh-switch"' not in client.get(PAGE).content.decode()
    assert client.post(SWITCH, {"ssh_enabled": "0"}).status_code == 403
    client.force_login(cluster.bob)
    assert client.post(SWITCH, {"ssh_enabled": "0"}).status_code == 404
    assert ssh_enabled(cluster) and len(switch_lines()) == 2


def test_the_gateway_follows_the_switch(cluster, api_as):
    from portal import ssh_access

    api_as(cluster.alice).patch(API, {"ssh_enabled": False}, format="json")
    refused = ssh_access.decide(cluster.carol, "vision-lab.lab")
    assert refused.target is None and refused.refusal == "SSH is turned off in workspace vision-lab"
    bob = ssh_access.decide(cluster.bob, "vision-lab.lab")   # another tenant still learns nothing
    assert "no running notebook or job by that name" in bob.refusal
