"""The gateway's session audit feeds the idle rule's SSH signal: a session with traffic in the window
counts its bytes, an open silent one counts 0, one that ended before the window is not there."""

from datetime import timedelta

from billing.api import ssh_bytes_by_job
from portal.models import SshSession
from tests.factories import JobFactory


def test_sessions_in_the_window_give_their_bytes_and_silent_ones_zero(cluster, clock):
    now = clock.now
    busy, silent, gone = (JobFactory(workspace=cluster.vision) for _ in range(3))
    SshSession.objects.create(job=busy, replica="main-0", started=now - timedelta(hours=2),
                              last_activity=now - timedelta(minutes=5), bytes_in=3000, bytes_out=9000)
    SshSession.objects.create(job=silent, replica="main-0", started=now - timedelta(hours=2),
                              last_activity=now - timedelta(hours=1), bytes_in=50_000, bytes_out=50_000)
    SshSession.objects.create(job=gone, replica="main-0", started=now - timedelta(hours=3),
                              ended=now - timedelta(hours=2), last_activity=now - timedelta(hours=2), bytes_in=10)
    window = ssh_bytes_by_job(now - timedelta(minutes=30), now)
    assert window == {busy.pk: 12000, silent.pk: 0}
