"""The scheduling core's history sentences, each written once: a job event's reason, as `said(texts.NAME,
**figures)` stores it (msgid and figures, see scheduling.history_texts), rendered in the reader's language
when read. A msgid here is stored in rows: reword one only with a data migration, or old rows fall back
to their English text."""

from django.utils.translation import gettext_noop

# A job's life as its owner or an operator steers it (scheduling.services).
SUBMITTED = gettext_noop("submitted to queue %(queue)s by %(user)s")
BACK_IN_ITS_QUEUE = gettext_noop("back in its queue")
BACK_IN_QUEUE = gettext_noop("%(why)s: back in queue %(queue)s")
CANCELLED_BY_USER = gettext_noop("cancelled by %(user)s")
CANCELLED_BY = gettext_noop("cancelled %(by)s")
REQUEUED_BY = gettext_noop("requeued %(by)s")
BY_OPERATOR_FOR_REASON = gettext_noop("by operator %(operator)s: %(reason)s")
BY_OPERATOR = gettext_noop("by operator %(operator)s")
PRIORITY_CHANGED = gettext_noop("priority %(old)s → %(new)s %(by)s")
QUEUE_CHANGED = gettext_noop("moved from queue %(old)s to %(new)s %(by)s")
STARTED_BY_USER = gettext_noop("started by %(user)s")
STOPPED_BY_USER_FOR_REASON = gettext_noop("stopped by %(user)s: %(reason)s")
STOPPED_BY_USER = gettext_noop("stopped by %(user)s")
STOPPED_BY_POLICY_FOR_REASON = gettext_noop("stopped by policy: %(reason)s")
STOPPED_BY_POLICY = gettext_noop("stopped by policy")
DELETED_WITH_HOME = gettext_noop("deleted by %(user)s; its home volume deleted")
DELETED_BY_USER = gettext_noop("deleted by %(user)s")
FINAL_COST = gettext_noop("final cost %(cost)s %(currency)s")

# What a scheduling cycle did to a job's replicas (scheduling.cycle.run).
PLACED = gettext_noop("%(count)s replicas on %(nodes)s")
GROWN = gettext_noop("%(count)s more replicas on %(nodes)s")
RUNNING = gettext_noop("%(count)s replicas running")
EVERY_REPLICA_FINISHED = gettext_noop("every replica finished")
REPLICA_FAILED = gettext_noop("replica %(replica)s failed: %(message)s")
REPLICAS_LOST_WITH_NODE = gettext_noop("its replicas were lost with their node")
SOME_EVICTED_WHY = gettext_noop("%(count)s replicas evicted (%(reasons)s): %(why)s")
SOME_EVICTED = gettext_noop("%(count)s replicas evicted (%(reasons)s)")
EVICTED_WHY = gettext_noop("evicted: %(reasons)s: %(why)s")
EVICTED = gettext_noop("evicted: %(reasons)s")

# Why an eviction took GPUs, by the scheduler's rule, and who took them (scheduling.evictions).
RULE_FAIR_SHARE = gettext_noop("queue %(level)s held more than its fair share")
RULE_RECLAIM_WITHIN_DESERVED = gettext_noop("queue %(level)s was over its deserved quota and the taker stays within "
                                            "its own")
RULE_PRIORITY = gettext_noop("a job of higher priority in queue %(level)s needed the GPUs")
RULE_CONSOLIDATION = gettext_noop("moved to free whole GPUs for a waiting job")
RULE_REDUCE_COST = gettext_noop("it gave back GPUs it had borrowed over its queue's quota")
RULE_NODE_LOST = gettext_noop("its node was lost")
TAKER_JOB = gettext_noop("job %(job)s in queue %(queue)s")
TAKER_QUEUE = gettext_noop("a job in queue %(queue)s")
TAKEN_BY_WHY = gettext_noop("taken by %(taker)s: %(why)s")
TAKEN_BY = gettext_noop("taken by %(taker)s")

# An inference service's scaling: the autoscaler's reasons by key (scheduling.inference SCALE_REASONS).
SCALE_LOAD = gettext_noop("%(metric)s %(observed)s for a target of %(target)s per replica")
SCALE_UP = gettext_noop("up from %(current)s to %(desired)s: %(load)s")
SCALE_DOWN = gettext_noop("down from %(current)s to %(desired)s: %(load)s for %(delay)s s")
SCALE_STAYS_DELAYED = gettext_noop("stays at %(desired)s: %(load)s wants %(recommended)s, after %(delay)s s")
SCALE_STAYS = gettext_noop("stays at %(desired)s: %(load)s")
SCALE_WOKEN = gettext_noop("a request arrived while at zero: cold start")
SCALED_TO_ZERO = gettext_noop("scaled to zero: %(reason)s")
WOKEN = gettext_noop("a request arrived while the service had no replica")
COLD_START = gettext_noop("a replica started from zero in %(seconds)s s")
RESCALED = gettext_noop("replicas %(min)s..%(max)s, set by %(user)s")
LIMITS_SET = gettext_noop("limits %(requests)s requests and %(tokens)s tokens a minute, set by %(user)s")
MINIMUM_SET = gettext_noop("minimum of %(min)s set by %(user)s")
