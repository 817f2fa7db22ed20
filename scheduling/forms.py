"""Forms for queues and node pools, shared by the Django admin and the operator console.

They only parse input; the rules live in Queue.clean() and NodePool.clean()."""

import re

from django import forms
from django.utils.translation import gettext_lazy as _

from scheduling.models import Node, NodePool, Queue
from scheduling.spec.units import format_duration, parse_duration


class DurationField(forms.CharField):
    """A duration written as the task YAML writes one ("6h", "30m", "1d12h"), stored in seconds; empty: none."""

    def prepare_value(self, value):
        return format_duration(value) if isinstance(value, int) else value

    def to_python(self, value):
        text = str(value or "").strip()
        if not text:
            return None
        try:
            return parse_duration(text)
        except ValueError as error:
            raise forms.ValidationError(f"{text} {error}") from error


class KeptIfEmptyInteger(forms.IntegerField):
    """A whole number that an empty (or absent) value leaves as it was: forms posted before the field existed."""

    def has_changed(self, initial, data) -> bool:
        return data not in self.empty_values and super().has_changed(initial, data)


class QueueForm(forms.ModelForm):
    default_max_runtime_s = DurationField(
        required=False, label=_("Default max runtime"),
        help_text=_("How long a job runs at most when its spec gives no maxRuntime, e.g. 24h. Empty: no limit."))
    max_runtime_s = DurationField(
        required=False, label=_("Max runtime"),
        help_text=_("The most a job may ask for with maxRuntime; a job asking more is refused at submit. "
                    "Empty: no limit."))
    # bounded: an integer column overflows beyond 2^31 on PostgreSQL
    priority = forms.IntegerField(
        required=False, min_value=-1000, max_value=1000, label=_("Priority"),
        help_text=_("-1000 to 1000. Among sibling queues the highest is filled first and evicted last. Empty: 0."))

    class Meta:
        model = Queue
        fields = ["name", "parent", "deserved_gpus", "over_quota_weight", "limit_gpus", "priority",
                  "preemptible_only", "default_max_runtime_s", "max_runtime_s",
                  "max_termination_grace_s"]
        labels = {
            "name": _("Name"),
            "parent": _("Parent queue"),
            "deserved_gpus": _("Deserved quota (GPUs)"),
            "over_quota_weight": _("Over-quota weight"),
            "limit_gpus": _("Limit (GPUs)"),
            "preemptible_only": _("Preemptible work only"),
        }
        help_texts = {
            "name": _("Letters, digits, hyphens and underscores; task YAML names it in `queue:`."),
            "parent": _("Empty: a root queue. Not this queue or one of its sub-queues (the tree would loop), "
                      "and not a queue that holds jobs or that workspaces submit to (jobs go to leaf queues)."),
            "deserved_gpus": _("GPUs guaranteed to the queue while it has work; fractions allowed. The sub-queues of a "
                             "parent together deserve at most the parent's quota."),
            "over_quota_weight": _("0 or more: the queue's share of the GPUs left over beyond deserved quotas, "
                                 "against its siblings' weights. 0: no over-quota share."),
            "limit_gpus": _("The most GPUs the queue may hold, at least its deserved quota. Empty: no limit."),
            "preemptible_only": _("Accept only jobs that may be preempted."),
        }

    max_termination_grace_s = KeptIfEmptyInteger(
        required=False, min_value=0, max_value=24 * 3600, label=_("Longest termination grace period (seconds)"),
        help_text=_("A job's terminationGracePeriod (SIGTERM, then this long before the kill) may be at most this; "
                    "a job asking for more is refused at submit. Empty: unchanged (600 for a new queue)."))

    def clean_priority(self):
        return self.cleaned_data["priority"] or 0

    def clean(self):
        data = super().clean()
        default, most = data.get("default_max_runtime_s"), data.get("max_runtime_s")
        if default is not None and most is not None and default > most:
            self.add_error("default_max_runtime_s", _("%(default)s is more than the max runtime, %(most)s") % {
                "default": format_duration(default), "most": format_duration(most)})
        return data

    def clean_max_termination_grace_s(self):
        value = self.cleaned_data["max_termination_grace_s"]
        return self.instance.max_termination_grace_s if value is None else value


class QueueByNameForm(QueueForm):
    """The console names the parent queue instead of giving its id."""

    parent = forms.ModelChoiceField(Queue.objects.all(), to_field_name="name", required=False,
                                    label=QueueForm.Meta.labels["parent"], help_text=QueueForm.Meta.help_texts["parent"])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the instance gives the parent's id; the field names it
        if self.instance.parent_id is not None and self.initial.get("parent") == self.instance.parent_id:
            self.initial["parent"] = self.instance.parent.name


class MigLayoutField(forms.CharField):
    """MIG instances on every GPU, comma-separated (e.g. "3g.40gb, 2g.20gb")."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list | tuple) else value

    def to_python(self, value):
        if isinstance(value, list | tuple):
            return [str(p).strip() for p in value if str(p).strip()]
        return [p.strip() for p in str(value or "").split(",") if p.strip()]


class TopologyLevelsField(MigLayoutField):
    """Topology levels as node label keys, outermost first, comma-separated (e.g. "example.com/block,
    topology.kubernetes.io/rack")."""


class NodePoolForm(forms.ModelForm):
    mig_layout = MigLayoutField(required=False, help_text=_('Instances on every GPU, e.g. "3g.40gb, 2g.20gb"'))
    topology_levels = TopologyLevelsField(required=False)

    class Meta:
        model = NodePool
        fields = "__all__"

    def clean_mig_layout(self):
        # a layout only means something in MIG mode
        return self.cleaned_data["mig_layout"] if self.data.get("sharing") == "mig" else []


class PoolPolicyForm(NodePoolForm):
    """What the console may change on a pool (the hardware comes from the nodes)."""

    class Meta(NodePoolForm.Meta):
        fields = ["placement", "sharing", "timeslice_replicas", "mig_layout", "spot", "topology_levels",
                  "bucket_csi_driver", "deadline_discount"]
        labels = {
            "placement": _("Placement policy"),
            "sharing": _("Sharing mode"),
            "timeslice_replicas": _("Time-slice replicas per GPU"),
            "mig_layout": _("MIG layout"),
            "spot": _("Spot / preemptible nodes"),
            "topology_levels": _("Topology levels"),
            "bucket_csi_driver": _("Bucket CSI driver"),
            "deadline_discount": _("Deadline discount"),
        }
        help_texts = {
            "placement": _("Where the scheduler puts work: bin-pack fills nodes, spread balances them, "
                         "fragmentation-aware keeps whole GPUs free for large jobs."),
            "sharing": _("Exclusive and fractions: whole GPUs or fractions of one. MIG: each GPU cut into the MIG "
                       "layout below. Time-slicing: each GPU shared by several replicas. Changing it needs the "
                       "pool's nodes drained."),
            "timeslice_replicas": _("1 to 64: replicas sharing one GPU in time-slicing mode."),
            "spot": _("Discounted nodes with no completion promise: jobs on them may be preempted."),
            "topology_levels": _("Node label keys, outermost first, comma-separated, e.g. \"example.com/block, "
                                 "topology.kubernetes.io/rack\" (or an NVLink domain label for NVL72-class systems). "
                                 "Jobs ask for a level by the key's last part: topology: {required: rack}."),
            "bucket_csi_driver": _("Kubernetes only: jobs on this pool also get each bucket they read mounted as a "
                                   "folder (at the spec's mountPath, or /buckets/<name>) through this driver, which "
                                   "you install in the cluster. None: the AWS_* environment only."),
            # xgettext:no-python-format
            "deadline_discount": _("0 to 1: the share taken off work priced \"by the deadline\" on this pool outside "
                                   "the off-peak windows (0.40 = 40% off). Blank: the price table's off-peak discount."),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["mig_layout"].label = self.Meta.labels["mig_layout"]
        self.fields["topology_levels"].label = self.Meta.labels["topology_levels"]
        self.fields["topology_levels"].help_text = self.Meta.help_texts["topology_levels"]
        self.fields["mig_layout"].help_text = _("MIG mode only: the instances on every GPU, comma-separated, e.g. "
                                                '"3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb". At most 7 compute slices.')


class NewPoolForm(PoolPolicyForm):
    """A pool made before its nodes join: their agents then report into it by name."""

    class Meta(PoolPolicyForm.Meta):
        fields = ["name", "vendor", "gpu_model", "gpu_memory_mib", *PoolPolicyForm.Meta.fields]
        labels = {**PoolPolicyForm.Meta.labels, "name": _("Name"), "vendor": _("GPU vendor"), "gpu_model": _("GPU model"),
                  "gpu_memory_mib": _("GPU memory (MiB)")}
        help_texts = {
            **PoolPolicyForm.Meta.help_texts,
            "name": _("Letters, digits and hyphens; node agents name it in their pool setting, task YAML in `pool:`."),
            "gpu_model": _("As the GPU labels it (nvidia.com/gpu.product), e.g. H100-80GB."),
            "gpu_memory_mib": _("Memory of one GPU, e.g. 81920 for 80 GiB."),
        }


class IdlePolicyForm(forms.ModelForm):
    """A pool's idle GPU policy (the console's Health page)."""

    class Meta:
        model = NodePool
        fields = ["idle_threshold_pct", "idle_window_min", "idle_action", "idle_grace_min", "idle_stop_training"]
        labels = {
            # xgettext:no-python-format
            "idle_threshold_pct": _("Threshold (% utilisation)"),
            "idle_window_min": _("Window (minutes)"),
            "idle_action": _("Action"),
            "idle_grace_min": _("Grace period (minutes)"),
            "idle_stop_training": _("Stop training jobs too"),
        }
        help_texts = {
            "idle_threshold_pct": _("0 to 100. A held GPU slice whose mean utilisation (of the slice) stays below this "
                                  "for the whole window is idle. 0: never idle."),
            "idle_window_min": _("1 to 1440 minutes."),
            "idle_action": _("Notify: the submitter gets an e-mail and a job event, once per idle spell. Notify, then "
                           "stop: the job is also cancelled once the grace period after the notice is over."),
            "idle_grace_min": _("0 to 10080 minutes between the notice and the stop (notify, then stop only)."),
            "idle_stop_training": _("Off: only interactive jobs (notebooks) are stopped; single, PyTorch and MPI "
                                  "training jobs are only notified. On: they are stopped too."),
        }


LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
MAX_LABEL_VALUE = 63


def parse_labels(text: str) -> dict[str, str]:
    """`key=value` per line (or comma-separated) as a dict; ValidationError naming the bad entry."""
    labels: dict[str, str] = {}
    for entry in re.split(r"[\n,]", text or ""):
        entry = entry.strip()
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not LABEL_KEY.match(key) or len(value) > MAX_LABEL_VALUE:
            raise forms.ValidationError(_("%(entry)s is not a label: write key=value, the key of letters, digits, "
                                          "'-', '_' and '.', the value at most 63 characters") % {"entry": entry[:80]})
        labels[key] = value
    return labels


def labels_text(labels: dict[str, str]) -> str:
    return "\n".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))


class NodeLabelsForm(forms.Form):
    labels = forms.CharField(label=_("Labels"), required=False, widget=forms.Textarea(attrs={"rows": 3}),
                             help_text=_("key=value, one per line"))

    def clean_labels(self) -> dict[str, str]:
        return parse_labels(self.cleaned_data["labels"])


class NewNodeForm(forms.ModelForm):
    """A node the operator adds before its agent reports: its GPUs are the pool's model, their uuids
    filled in by the agent's first heartbeat."""

    gpus = forms.IntegerField(label=_("GPUs"), min_value=0, max_value=64, initial=8,
                              help_text=_("How many GPUs of the pool's model it has"))
    labels = forms.CharField(label=_("Labels"), required=False, help_text=_("key=value, comma-separated"))

    class Meta:
        model = Node
        fields = ["name", "pool", "cpu_milli", "memory_mib"]
        labels = {"name": _("Name"), "pool": _("Pool"), "cpu_milli": _("CPU (millicores)"),
                  "memory_mib": _("Memory (MiB)")}
        help_texts = {"name": _("As the cluster names it (its Kubernetes node name)")}

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name):
            raise forms.ValidationError(_("lower-case letters, digits, '-' and '.', as a Kubernetes node name"))
        return name

    def clean_labels(self) -> dict[str, str]:
        return parse_labels(self.cleaned_data["labels"])
