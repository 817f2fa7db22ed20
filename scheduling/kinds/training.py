"""Training: batch work written with roles (the clean form's default kind), run to completion."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy, gettext_noop

from scheduling.kinds.base import Kind
from scheduling.spec import roles_to_dict
from scheduling.spec.kinds import read_roles


class TrainingKind(Kind):
    name = "training"
    label = gettext_lazy("Training")
    noun = gettext_noop("a training job")
    resource_type = "Training job"
    # its GPUs left idle stop it only where its pool says so (NodePool.idle_stop_training)
    idle_needs_pool_consent = True
    form_template = "scheduling/kinds/training_form.html"  # the roles tab (scheduling.spec.IMAGE_FORM_FIELDS)
    tab_label = gettext_lazy("Training")
    form_id = "image-form"

    def read(self, r):
        return read_roles(r, self.name)

    def to_dict(self, spec) -> dict[str, Any]:
        return roles_to_dict(spec)

    def requests(self, spec, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return requests  # the core's requests as they are: training is what it schedules by default


KIND = TrainingKind()
