"""Samples the portal refuses as invalid are not resent (logged, counted, dead-lettered), the rest of
the spool is kept; a refusal names the sample by its index in the batch, so the agent never needs
the portal to echo a malformed id back."""

from test_agent_delivery import READINGS_PER_TICK, collect_ticks, make_agent


def test_samples_refused_by_index_are_not_resent_and_the_rest_is_kept(portal, tmp_path):
    portal.echo_rejected_ids = False
    agent = make_agent(portal, tmp_path / "spool.sqlite")
    collect_ticks(agent, 0, 1)
    bad = sorted(agent.spool.added)[0]
    portal.reject = {bad: "gpu_uuid must be a string of 1..80 characters without NUL"}
    portal.unanswered = {sorted(agent.spool.added)[1]}  # no answer for it: kept and resent
    report = agent.flush()
    agent.flush()
    assert report.rejected == 1 and report.accepted == READINGS_PER_TICK - 2
    assert agent.rejected_total == 1
    assert portal.times_received[bad] == 1
    assert agent.spool.count() == 1 and bad not in {s["id"] for s in agent.spool.pending(100)}
    assert bad in agent.spool.dead_letter_path.read_text()
