"""What a workload kind answers. Each kind is one module of this package with one object, `KIND`.

The defaults are those of batch work (training): read by the clean-form roles reader, quoted for its
stated duration with an off-peak option, launched as a modelled pod that runs to completion, idle when
its GPUs stay below its pool's threshold, cancelled by an idle policy, never stopped and started.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext

from scheduling.backends.base import BATCH
from scheduling.errors import Conflict, DomainError

if TYPE_CHECKING:
    from scheduling.spec.model import JobSpec
    from scheduling.spec.read import Reader, ReadResult

# What an idle policy does to a job once it may: stop it (Stopped, started again at will, its slice
# freed) or cancel it (it ends, paying for what it held).
IDLE_STOP, IDLE_CANCEL = "stop", "cancel"
# What the cycle does to a run past its max runtime: stop it (it can start again) or fail it (retried as
# its spec says). A value, not a call: stopping lives in scheduling.services, which imports this module.
OVERDUE_STOP, OVERDUE_FAIL = "stop", "fail"
# How a kind's quote rates read on the submit page: none, per hour, per hour at its fewest and most replicas.
RATES_NONE, RATES_PER_HOUR, RATES_PER_REPLICAS = "", "per-hour", "per-replicas"
# The values a kind's attributes may take: what billing, the submit page and the portal's lists act on.
KNOWN_VALUES = {"idle_action": {IDLE_STOP, IDLE_CANCEL}, "quote_rates": {RATES_NONE, RATES_PER_HOUR, RATES_PER_REPLICAS},
                "listed_on": {"jobs", "notebooks", "services"}}


class Kind:
    name: str = ""
    label: Any = ""            # `Job.kind`'s choice label (translatable)
    noun: str = ""             # msgid: "a notebook", for the spec reader's messages
    resource_type: str = ""    # the FOCUS export's ResourceType (English, a standard's field)
    # Work that runs while its user is there: quoted to start now only (no off-peak option).
    interactive: bool = False
    # Stops without ending and starts again (Stopped holds nothing and is billed nothing).
    stoppable: bool = False
    # msgid: one live job per name in a workspace (its name picks its URL); None: names may repeat.
    name_taken: str | None = None
    # The duration a quote assumes when the spec states none (None: the platform's default).
    quote_duration_s: int | None = None
    # The process its replicas run, which every backend knows how to launch (scheduling.backends.base).
    launch_shape: str = BATCH
    ssh: bool = True           # its replicas run an SSH server the gateway reaches (scheduling.ssh)
    has_home: bool = False     # a home volume (scheduling.storage), kept across stop and start and after the job
    autoscaled: bool = False   # a service whose replicas the autoscaler sets (scheduling.inference)
    personal: bool = False     # its submitter's own: stopped when their account is deactivated (SCIM)
    # Idle: judged by its server's own activity (a notebook's kernels) rather than the GPU samples of
    # the node agents, and what its idle policy does.
    idle_by_activity: bool = False
    idle_action: str = IDLE_CANCEL
    idle_needs_pool_consent: bool = False  # stopped for idling only where its pool allows it (idle_stop_training)
    quote_rates: str = RATES_NONE
    # The image form's tab: form field -> its path in the kind's document (None: the kind has no tab of its
    # own); the paths no one field owns -> the field that fixes them.
    form_fields: dict[str, tuple] | None = None
    form_extra_names: dict[tuple, str] = {}
    # The tab's template on the submit page (None: no tab, written as YAML only), its label and its element id.
    form_template: str | None = None
    tab_label: Any = ""
    listed_on: str = "jobs"    # the portal page that lists its jobs: jobs, notebooks or services

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A kind that names a value no caller knows fails where it is written, not in a sweep hours later."""
        super().__init_subclass__(**kwargs)
        for attribute, allowed in KNOWN_VALUES.items():
            value = getattr(cls, attribute)
            if value not in allowed:
                raise TypeError(f"kind {cls.__name__}: {attribute} = {value!r}, not one of {sorted(allowed)}")

    @property
    def off_peak(self) -> bool:
        """Whether a quote offers to start it in the next off-peak window."""
        return not self.interactive

    def __repr__(self) -> str:
        return f"<kind {self.name}>"

    # -- the spec ----------------------------------------------------------------------------------
    def read(self, r: Reader) -> ReadResult:
        """The clean-form document in `r` as a JobSpec of this kind."""
        raise NotImplementedError

    def locate(self, spec: JobSpec):
        """Where a cluster problem points in this kind's document (scheduling.spec.read.clean_locate's shape)."""
        from scheduling.spec.read import clean_locate

        return clean_locate

    def to_dict(self, spec: JobSpec) -> dict[str, Any]:
        """The clean-form object of a spec of this kind (parse_job_spec_obj reads it back)."""
        raise NotImplementedError

    def requests(self, spec: JobSpec, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The stored core requests of a spec of this kind (spec/requests.py makes them for any job)."""
        return [{**r, "kind": self.name} for r in requests]

    @property
    def form_id(self) -> str:
        return f"{self.name}-form"

    def form_default_name(self, values: dict[str, Any]) -> str:
        """A tab's job name when the form gives none."""
        return self.name

    def form_values(self, spec: JobSpec) -> dict[str, str]:
        """Its own tab's fields read back from a spec of this kind, as text (blank: the default); the fields
        every tab has are scheduling.spec.kind_forms's."""
        return {}

    # -- submit, start and stop --------------------------------------------------------------------
    def check_submit(self, workspace, spec: JobSpec) -> None:
        """Refuse (raise) what a submit of this kind cannot have besides the spec's own checks."""

    def before_submit(self, workspace, spec: JobSpec) -> None:
        """Make what a job of this kind needs before its row is stored."""

    def after_submit(self, job) -> None:
        """Make what a job of this kind keeps beside its row, once stored."""

    def before_start(self, job) -> None:
        """A stopped job of this kind (locked by the caller) is about to go back in its queue."""

    def overdue_action(self) -> str:
        """What the cycle does to a run past its max runtime: one that stops and starts is stopped."""
        return OVERDUE_STOP if self.stoppable else OVERDUE_FAIL

    # -- launch ------------------------------------------------------------------------------------
    def launch_fields(self, job) -> dict[str, Any]:
        """What a ReplicaLaunch of this kind's job carries besides its role, or sets instead of the role's
        (scheduling.backends.base)."""
        return {"kind": self.name, "shape": self.launch_shape, "ssh": self.ssh}

    def process_metrics(self, backend, key: tuple[int, str, int], workspace: str, name: str) -> dict[str, str]:
        """Where a running replica's own server tells its figures, and the header it asks for ({}: it tells none)."""
        return {}

    # -- what the layers above ask of a job of this kind: each is answered from the kind's own facts, so
    # that no caller reads a fact to decide
    def runs_ssh_server(self, job) -> bool:
        """Whether the job's replicas run an SSH server that the gateway reaches (scheduling.ssh)."""
        return self.ssh

    def home_volume(self, job) -> str | None:
        """The name of the job's home volume, kept across stop and start (None: the kind has none)."""
        return job.name if self.has_home else None

    def scale_target(self, spec: JobSpec) -> tuple[str, float] | None:
        """The metric and the value the autoscaler holds a service's replicas at (None: it does not size this
        kind, so there is no rate at which its replicas settle)."""
        return None

    def name_refusal(self, spec: JobSpec, workspace, live_state) -> str | None:
        """Why the spec may not take a name a live job of this kind has in the workspace, where the name picks
        its URL (`name_taken`); None: it may. `live_state()`: that job's state, None when there is none (asked
        only where names are taken)."""
        if self.name_taken is None or (state := live_state()) is None:
            return None
        return gettext(self.name_taken) % {"name": spec.name, "workspace": workspace.slug, "state": state}

    # -- idle ----------------------------------------------------------------------------------------
    def idle_rule(self, by_utilisation, by_activity):
        """Which of the caller's idle rules judges a job of this kind: its server's own activity, or its GPUs."""
        return by_activity if self.idle_by_activity else by_utilisation

    def end_idle(self, job, reason: str, *, stop, cancel) -> None:
        """End an idle job whose grace is over with the caller's act its kind names: `stop` (Stopped, started
        again at will) or `cancel` (it ends, paying for what it held)."""
        (stop if self.idle_action == IDLE_STOP else cancel)(job, reason)

    def idle_may_stop(self, pool) -> bool:
        """Whether the pool's idle policy ends (stops or cancels) an idle job of this kind after its grace."""
        from scheduling.models import IdleAction

        if pool.idle_action != IdleAction.NOTIFY_THEN_STOP:
            return False
        return not self.idle_needs_pool_consent or pool.idle_stop_training

    def idle_stop_at(self, notified: datetime, pool) -> datetime:
        """When an idle, notified job of this kind that the policy ends is due."""
        return notified + timedelta(minutes=pool.idle_grace_min)

    # -- what a caller may ask of a job besides submit and cancel: each refuses what its kind does not do,
    # in its own words, so no caller names the kinds that do
    def check_stop_start(self, job) -> None:
        """Refuse to stop or start a job of a kind that runs until it ends."""
        if not self.stoppable:
            self._refuse(job, "does not stop and start: cancel it instead")

    def check_home(self, job) -> None:
        """Refuse to delete the home volume of a job of a kind that has none."""
        if not self.has_home:
            self._refuse(job, "has no home volume: cancel it instead")

    def check_scaled(self, job) -> None:
        """Refuse a replica range or a revision for a job of a kind the autoscaler does not size."""
        if not self.autoscaled:
            self._refuse(job, "the autoscaler does not size: it has no replica range or revisions")

    def check_keep_alive(self, job, field: str) -> None:
        """Refuse a keep-alive for a job whose idling is not judged by its server's activity (a user there)."""
        if not self.idle_by_activity:
            raise DomainError(gettext("%(noun)s cannot be kept alive: its idle policy reads its GPUs") % {
                "noun": gettext(self.noun)}, field=field)

    def schedule_refusal(self) -> str | None:
        """Why a spec of this kind cannot have a schedule (None: it can): work that runs until stopped has no
        runs to repeat."""
        if not self.stoppable:
            return None
        return gettext("schedule does not apply to %(noun)s: it runs until stopped, a schedule makes runs of work "
                       "that ends") % {"noun": gettext(self.noun)}

    def _refuse(self, job, why: str) -> None:
        raise Conflict(f"job {job.pk} is {self.noun}, which {why}", field="kind")

    def page_url(self, job) -> str:
        """Where a notice about the job sends its reader."""
        return f"/jobs/{job.pk}/"
