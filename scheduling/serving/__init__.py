"""Notebooks and inference services: the pure rules (no Django, no clock).

`latency` (how long a replica on a GPU slice takes, and M/M/c queueing), `autoscaler` (how many
replicas a service wants), `memory` (the GPU memory a model needs and the smallest slice that holds
it), `simulate` (one service in simulated time, for the benchmark and quotes at a request rate) and
`idle` (when a notebook counts as idle).
"""
