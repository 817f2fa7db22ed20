"""The demo data of `make run`, all in this package; tests never use it (they build their own
world from factories)."""

from portal.demo.agents import write_agent_tokens


def load_all(*, history: bool = True) -> None:
    from billing.api import chargeback
    from portal.demo import chinese, cluster, finance, prices, tenants
    from portal.demo.usage import load_demo_usage

    tenants.load_tenants()
    cluster.load_cluster()
    cluster.load_queues()
    prices.load_prices()
    chinese.load_chinese_team()
    finance.load_exchange_rates()
    finance.load_chargeback_policies()
    if history:
        load_demo_usage()  # the last 30 days of jobs, played through the live services
        chargeback.post_due_chargebacks()  # the month before, once final, as the ledger task would
        from portal.console.planner_services import latest_savings, refresh_savings

        if latest_savings() is None:
            refresh_savings()  # the dashboard's GPUs saved by the pool against silos, from that month's replay


__all__ = ["load_all", "write_agent_tokens"]
