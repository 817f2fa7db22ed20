"""The capacity planner's form: the cluster's pools and queues as fields the operator edits, the replay's
window and settings, and an optional uploaded trace. Every error is given beside its field."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from billing.api import price_currencies
from portal.console.planner_services import (
    MAX_TRACE_BYTES,
    PlannerInputError,
    actual_inputs,
    check_trace,
    leaf_queues,
)
from scheduling.api import QueueRow, validate_queue
from scheduling.api import cluster_model as cm
from scheduling.models import said

MAX_NODES = 1000
MAX_GPUS = Decimal(100_000)


def pool_field(pool: str, what: str) -> str:
    return f"pool__{pool}__{what}"


def queue_field(queue: str, what: str) -> str:
    return f"queue__{queue}__{what}"


class PlannerForm(forms.Form):
    days = forms.IntegerField(label=_("Days of history"), min_value=1, max_value=90, initial=30,
                              help_text=_("Jobs submitted in the last this many days are replayed"))
    checkpoint_min = forms.IntegerField(
        label=_("Checkpoint every (minutes)"), min_value=0, max_value=1440, initial=30, required=False,
        help_text=_("A preempted job loses its work since its last checkpoint; 0: nothing lost; empty: it starts over"))
    preemption = forms.BooleanField(
        label=_("Best-effort preemption"), required=False, initial=True,
        help_text=_("Off: no job may be evicted, so work over a queue's deserved quota waits instead of borrowing"))
    trace = forms.FileField(label=_("Load a trace (Philly CSV)"), required=False,
                            help_text=_("Replay this trace instead of the history: `user`, `num_gpu`, `submit_time`, "
                                        "`duration`, `best_effort` or `job_type`"))
    trace_queue = forms.ChoiceField(label=_("Queue for the trace's teams"), required=False,
                                    help_text=_("A team named like a queue goes there; the others here"))
    currency = forms.ChoiceField(label=_("Currency"), required=False,
                                 help_text=_("The costs at list price of this currency's price table in force"))

    def __init__(self, *args, cluster: cm.Snapshot, **kwargs):
        super().__init__(*args, **kwargs)
        self.cluster = cluster
        start = actual_inputs(cluster)
        self.pool_rows, self.queue_rows = [], []
        for name, p in start["pools"].items():
            fields = {
                "nodes": forms.IntegerField(label=_("Nodes"), min_value=0, max_value=MAX_NODES, initial=p["nodes"]),
                "gpus_per_node": forms.IntegerField(label=_("GPUs per node"), min_value=1, max_value=16,
                                                    initial=p["gpus_per_node"],
                                                    help_text=_("Of the nodes added")),
                "gpu_model": forms.CharField(label=_("GPU model"), max_length=64, initial=p["gpu_model"]),
                "gpu_memory_gib": forms.IntegerField(label=_("GPU memory (GiB)"), min_value=1, max_value=4096,
                                                     initial=p["gpu_memory_gib"]),
            }
            for what, field in fields.items():
                self.fields[pool_field(name, what)] = field
            self.pool_rows.append((name, [self[pool_field(name, w)] for w in fields]))
        for name, q in start["queues"].items():
            fields = {
                "deserved_gpus": forms.DecimalField(label=_("Deserved GPUs"), min_value=0, max_value=MAX_GPUS,
                                                    decimal_places=2, initial=Decimal(q["deserved_gpus"])),
                "limit_gpus": forms.DecimalField(label=_("Limit (GPUs)"), min_value=0, max_value=MAX_GPUS,
                                                 decimal_places=2, required=False,
                                                 initial=None if q["limit_gpus"] is None else Decimal(q["limit_gpus"])),
            }
            for what, field in fields.items():
                self.fields[queue_field(name, what)] = field
            self.queue_rows.append((name, [self[queue_field(name, w)] for w in fields]))
        self.fields["trace_queue"].choices = [("", "—")] + [(q, q) for q in leaf_queues(cluster)]
        currencies = price_currencies()
        self.fields["currency"].choices = [(c, c) for c in currencies]
        self.fields["currency"].initial = currencies[0]
        self.trace_text = ""

    def clean_trace(self):
        upload = self.cleaned_data.get("trace")
        if not upload:
            return None
        if upload.size > MAX_TRACE_BYTES:
            raise forms.ValidationError(gettext("the trace is over %(mib)s MiB") % {"mib": MAX_TRACE_BYTES // (1024 * 1024)})
        try:
            text = upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError(gettext("the trace is not UTF-8 text")) from None
        if "\x00" in text:
            raise forms.ValidationError(gettext("the trace is not text"))
        try:
            self.trace_jobs = check_trace(text)
        except PlannerInputError as error:
            raise forms.ValidationError(str(error)) from None
        self.trace_text = text
        return upload

    def clean(self):
        data = super().clean()
        if data.get("trace") and not data.get("trace_queue"):
            self.add_error("trace_queue", gettext("choose the queue that takes the trace's teams"))
        rows, parents = [], {q.name: q.parent for q in self.cluster.queues}
        for q in self.cluster.queues:
            deserved = data.get(queue_field(q.name, "deserved_gpus"))
            if deserved is None:
                return data                  # its own error is shown beside it
            rows.append(QueueRow(q.name, parents[q.name], deserved, Decimal(str(q.over_quota_weight)),
                                 data.get(queue_field(q.name, "limit_gpus"))))
        for row in rows:
            for field, messages in validate_queue(rows, row.name, say=said).items():
                name = queue_field(row.name, "limit_gpus" if field == "limit_gpus" else "deserved_gpus")
                for message in messages:
                    self.add_error(name, message)
        return data

    def inputs(self) -> dict:
        """The run's inputs (JSON) from the cleaned form."""
        data = self.cleaned_data
        pools = {name: {"nodes": data[pool_field(name, "nodes")], "gpus_per_node": data[pool_field(name, "gpus_per_node")],
                        "gpu_model": data[pool_field(name, "gpu_model")].strip(),
                        "gpu_memory_gib": data[pool_field(name, "gpu_memory_gib")]}
                 for name, _fields in self.pool_rows}
        queues = {}
        for name, _fields in self.queue_rows:
            limit = data.get(queue_field(name, "limit_gpus"))
            queues[name] = {"deserved_gpus": str(data[queue_field(name, "deserved_gpus")]),
                            "limit_gpus": None if limit is None else str(limit)}
        out = {"days": data["days"], "checkpoint_min": data.get("checkpoint_min"), "preemption": data["preemption"],
               "pools": pools, "queues": queues, "currency": data.get("currency") or price_currencies()[0]}
        if data.get("trace"):
            out["trace_queue"] = data["trace_queue"]
            out["trace_name"] = data["trace"].name[:120]
        return out
