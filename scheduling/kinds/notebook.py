"""Notebooks: one interactive JupyterLab replica with a persistent home, stopped when idle and started
again at will, listed on the notebooks page and reached through the portal's proxy (/nb/)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.translation import gettext_lazy, gettext_noop

from scheduling import notebooks, storage
from scheduling.backends.base import JUPYTER
from scheduling.kinds.base import IDLE_STOP, RATES_PER_HOUR
from scheduling.kinds.one_role import OneRoleKind
from scheduling.spec.kind_forms import JOB_FIELDS, SLICE_FIELDS, slug
from scheduling.spec.kinds import notebook_to_dict, read_notebook
from scheduling.spec.units import format_duration, format_memory
from scheduling.spec.workloads import DEFAULT_NOTEBOOK_IMAGE, NOTEBOOK_QUOTE_S


class NotebookKind(OneRoleKind):
    name = "notebook"
    label = gettext_lazy("Notebook")
    noun = gettext_noop("a notebook")
    resource_type = "Notebook"
    interactive = True
    stoppable = True
    personal = True
    name_taken = gettext_noop("notebook '%(name)s' already exists in workspace '%(workspace)s' (%(state)s): "
                              "start or delete it, or choose another name")
    quote_duration_s = NOTEBOOK_QUOTE_S  # it runs until stopped: its quote is for one hour
    launch_shape = JUPYTER
    has_home = True
    idle_by_activity = True   # no kernel activity and no GPU use for its idleAfter (scheduling.serving.idle)
    idle_action = IDLE_STOP   # its slice freed, its home kept
    quote_rates = RATES_PER_HOUR
    form_fields = {**JOB_FIELDS, "image": ("image",), **SLICE_FIELDS, "homeSize": ("home", "size"),
                   "idleAfter": ("idleAfter",)}
    form_extra_names = {("home",): "homeSize", ("resources",): "gpus"}
    form_template = "scheduling/kinds/notebook_form.html"
    tab_label = gettext_lazy("Notebook")
    listed_on = "notebooks"

    def read(self, r):
        return read_notebook(r, self.name)

    def document_from_role(self, spec, role: dict[str, Any]) -> dict[str, Any]:
        return notebook_to_dict(spec, role)

    def check_submit(self, workspace, spec) -> None:
        if home_mib := self._home_mib(spec):  # its home volume fits the workspace's quota
            storage.check_home(workspace, spec.name, home_mib)

    def before_submit(self, workspace, spec) -> None:
        if home_mib := self._home_mib(spec):  # made at the first notebook of the name, found again
            storage.ensure_home(workspace, spec.name, home_mib)

    @staticmethod
    def _home_mib(spec) -> int:
        return spec.notebook.home_mib if spec.notebook is not None else 0

    def form_default_name(self, values: dict[str, Any]) -> str:
        return slug(str(values.get("image") or DEFAULT_NOTEBOOK_IMAGE)) or self.name

    def form_values(self, spec) -> dict[str, str]:
        role, idle = spec.roles[0], spec.notebook.idle_after_s
        return {"image": "" if role.image == DEFAULT_NOTEBOOK_IMAGE else role.image,
                "homeSize": format_memory(spec.notebook.home_mib),
                "idleAfter": "" if idle is None else format_duration(idle)}

    def launch_fields(self, job) -> dict[str, Any]:
        home_mib = notebooks.notebook_spec(job).home_mib
        return {**super().launch_fields(job), "token": notebooks.notebook_token(job.pk),
                "base_url": self.base_url(job.workspace.slug, job.name), "home_mib": home_mib,
                "home": storage.home_mount(job, home_mib) if home_mib else None}

    def base_url(self, workspace: str, name: str) -> str:
        return notebooks.base_url(workspace, name)

    def metrics_auth(self, found, job_id: int) -> str:
        return f"token {notebooks.notebook_token(job_id)}"

    def idle_may_stop(self, pool) -> bool:
        return True  # its own idle rule always stops it

    def idle_stop_at(self, notified: datetime, pool) -> datetime:
        """With the notice, or after the pool's grace where the pool notifies first."""
        from scheduling.models import IdleAction

        return notified if pool.idle_action != IdleAction.NOTIFY_THEN_STOP else super().idle_stop_at(notified, pool)

    def page_url(self, job) -> str:
        return f"/notebooks/?workspace={job.workspace.slug}"


KIND = NotebookKind()
