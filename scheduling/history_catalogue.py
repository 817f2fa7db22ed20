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
# A schedule's run (scheduling.schedules) with concurrency Replace ends the unfinished one.
REPLACED_BY_SCHEDULE_RUN = gettext_noop("replaced by the next run of schedule %(schedule)s")

# What a scheduling cycle did to a job's replicas (scheduling.cycle.run); a (one, many) pair is chosen by
# its `count` when said.
PLACED = (gettext_noop("%(count)s replica on %(nodes)s"), gettext_noop("%(count)s replicas on %(nodes)s"))
GROWN = (gettext_noop("%(count)s more replica on %(nodes)s"), gettext_noop("%(count)s more replicas on %(nodes)s"))
RUNNING = (gettext_noop("%(count)s replica running"), gettext_noop("%(count)s replicas running"))
EVERY_REPLICA_FINISHED = gettext_noop("every replica finished")
REPLICA_FAILED = gettext_noop("replica %(replica)s failed: %(message)s")
REPLICAS_LOST_WITH_NODE = gettext_noop("its replicas were lost with their node")
SOME_EVICTED_WHY = (gettext_noop("%(count)s replica evicted (%(reasons)s): %(why)s"),
                    gettext_noop("%(count)s replicas evicted (%(reasons)s): %(why)s"))
SOME_EVICTED = (gettext_noop("%(count)s replica evicted (%(reasons)s)"),
                gettext_noop("%(count)s replicas evicted (%(reasons)s)"))
EVICTED_WHY = gettext_noop("evicted: %(reasons)s: %(why)s")
EVICTED = gettext_noop("evicted: %(reasons)s")
# What an eviction lost (scheduling.evictions lost_said): the work since the last checkpoint, or since the start.
LOST_SINCE_CHECKPOINT = gettext_noop("%(hours)s GPU-hours lost since the last checkpoint")
LOST_SINCE_START = gettext_noop("%(hours)s GPU-hours lost since the start (no checkpoint)")

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

# Dependencies and arrays (scheduling.lifecycle).
RELEASED_AFTER = gettext_noop("the jobs it waited for ended as it asked (%(jobs)s): back in its queue")
DEPENDENCY_NOT_MET = gettext_noop("job %(job)s ended %(state)s; this job waited for it to end %(condition)s, "
                                  "which can no longer happen")
ARRAY_INDEX_SUBMITTED = gettext_noop("index %(index)s of array %(parent)s")
ARRAY_ENDED = gettext_noop("its %(count)s indices ended: %(counts)s")
ARRAY_INDEX_CANCELLED = gettext_noop("index %(index)s cancelled by %(user)s")
ARRAY_CANCELLED = gettext_noop("its array was cancelled")

# How a job's run ended, and what its life did next (scheduling.lifecycle).
EXITED_WITH_CODE = gettext_noop("replica %(replica)s exited with code %(exit_code)s")
EXITED_WITH_CODE_SAYING = gettext_noop("replica %(replica)s exited with code %(exit_code)s: %(message)s")
OUT_OF_MEMORY = gettext_noop("replica %(replica)s ran out of memory: killed at its %(memory)s limit (exit code 137)")
MAX_RUNTIME_REACHED = gettext_noop("it reached its maximum runtime of %(limit)s")
RETRYING = gettext_noop("%(why)s; retry %(retry)s of %(limit)s in %(backoff)s")
NO_RETRY_LEFT = gettext_noop("%(why)s; no retry left (retry limit %(limit)s)")
CLEANED_UP = gettext_noop("%(ttl)s after it finished (ttlAfterFinished): %(count)s replicas deleted")

# Inference services' revisions and traffic (scheduling.inference).
REVISION_MADE = gettext_noop("revision %(number)s (%(model)s) made by %(user)s; revision %(previous)s serves "
                             "until it is ready")
TRAFFIC_SET = gettext_noop("traffic %(split)s, set by %(user)s")
REVISION_PROMOTED = gettext_noop("revision %(number)s takes all the traffic, promoted by %(user)s")
REVISION_ROLLED_BACK = gettext_noop("rolled back to revision %(number)s by %(user)s")
REPLICAS_REPLACED = (gettext_noop("%(count)s replica of revision %(revisions)s replaced: revision %(ready)s is ready"),
                     gettext_noop("%(count)s replicas of revision %(revisions)s replaced: revision %(ready)s is ready"))

# A deadline job (scheduling.deadlines): found it can no longer be done by its deadline, reported at once.
DEADLINE_NOT_STARTED = gettext_noop(
    "can no longer finish by its deadline %(deadline)s: still waiting after its latest start %(latest_start)s")
DEADLINE_FINISHES_LATE = gettext_noop(
    "can no longer finish by its deadline %(deadline)s: expected to finish at %(finish)s")
