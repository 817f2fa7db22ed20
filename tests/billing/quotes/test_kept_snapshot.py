"""Quotes read the cluster's snapshot incrementally, as the cycle's worker does: a repeated quote reads
no job or replica row whole, a change since the last quote is read (the snapshot is the one a full read
gives), and what one workspace's quote leaves kept never changes another workspace's answer."""

from rest_framework.test import APIClient
from test_quote_totals_and_starts import FILLER, ONE_RTX, _fill, options

from scheduling import starts
from scheduling.api import clock as platform_clock
from scheduling.cycle.snapshot import build_snapshot


def client_of(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def quote(api, workspace):
    return options(api.post("/api/v1/quotes/", {"workspace": workspace, "spec": ONE_RTX}, format="json"))


def test_a_repeated_quote_reads_no_row_whole_and_a_change_is_read(cluster, clock, run):
    alice = client_of(cluster.alice)
    assert quote(alice, "vision-lab")["rtx4090.exclusive.now"]["starts_now"]
    quote(alice, "vision-lab")
    assert starts._snapshots.reads == {"jobs": 0, "replicas": 0}
    _fill(cluster, clock, run, FILLER)  # a cycle places 4 replicas
    assert not quote(alice, "vision-lab")["rtx4090.exclusive.now"]["starts_now"]
    assert starts._snapshots.reads["replicas"] >= 4
    now = platform_clock.now()
    assert starts.cluster_snapshot(now) == build_snapshot(now)


def test_one_workspaces_kept_quote_does_not_change_anothers(cluster, clock, run):
    _fill(cluster, clock, run, FILLER)
    alice, bob = client_of(cluster.alice), client_of(cluster.bob)
    answers = {}
    for api, workspace in ((alice, "vision-lab"), (bob, "nlp-group")):
        starts.forget_session()  # a fresh process: nothing kept
        answers[workspace] = quote(api, workspace)
    for api, workspace in ((alice, "vision-lab"), (bob, "nlp-group"), (alice, "vision-lab")):
        assert quote(api, workspace) == answers[workspace]  # after the other's, from what is kept
