"""Forms for queues and node pools, shared by the Django admin and the operator console.

They only parse input; the rules live in Queue.clean() and NodePool.clean()."""

from django import forms

from scheduling.models import NodePool, Queue


class QueueForm(forms.ModelForm):
    priority = forms.IntegerField(required=False, help_text="Empty: 0")

    class Meta:
        model = Queue
        fields = ["name", "parent", "deserved_gpus", "over_quota_weight", "limit_gpus", "priority",
                  "preemptible_only"]

    def clean_priority(self):
        return self.cleaned_data["priority"] or 0


class QueueByNameForm(QueueForm):
    """The console names the parent queue instead of giving its id."""

    parent = forms.ModelChoiceField(Queue.objects.all(), to_field_name="name", required=False)


class MigLayoutField(forms.CharField):
    """MIG instances on every GPU, comma-separated (e.g. "3g.40gb, 2g.20gb")."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list | tuple) else value

    def to_python(self, value):
        if isinstance(value, list | tuple):
            return [str(p).strip() for p in value if str(p).strip()]
        return [p.strip() for p in str(value or "").split(",") if p.strip()]


class NodePoolForm(forms.ModelForm):
    mig_layout = MigLayoutField(required=False, help_text='Instances on every GPU, e.g. "3g.40gb, 2g.20gb"')

    class Meta:
        model = NodePool
        fields = "__all__"

    def clean_mig_layout(self):
        # a layout only means something in MIG mode
        return self.cleaned_data["mig_layout"] if self.data.get("sharing") == "mig" else []


class PoolPolicyForm(NodePoolForm):
    """What the console may change on a pool (the hardware comes from the nodes)."""

    class Meta(NodePoolForm.Meta):
        fields = ["placement", "sharing", "timeslice_replicas", "mig_layout", "spot"]
