"""Kinds written as one role at the document's top level, whose replicas are servers (a notebook, a service)."""

from __future__ import annotations

from typing import Any

from scheduling.kinds.base import Kind
from scheduling.spec import role_to_dict
from scheduling.spec.kinds import top_locate


class OneRoleKind(Kind):
    def locate(self, spec):
        return top_locate  # the role's fields are top-level

    def to_dict(self, spec) -> dict[str, Any]:
        return self.document_from_role(spec, role_to_dict(spec.roles[0]))

    def document_from_role(self, spec, role: dict[str, Any]) -> dict[str, Any]:
        """The clean-form object from its role written as a training role's dict (scheduling.spec.kinds)."""
        raise NotImplementedError

    def base_url(self, workspace: str, name: str) -> str:
        """The path its server answers under (the same on the portal, whose proxy forwards it)."""
        raise NotImplementedError

    def metrics_auth(self, found, job_id: int) -> str:
        """The header its server asks for."""
        raise NotImplementedError

    def process_metrics(self, backend, key, workspace: str, name: str) -> dict[str, str]:
        found = backend.endpoint(key, workspace=workspace, base_url=self.base_url(workspace, name))
        if found is None:  # no process, or not listening yet
            return {}
        return {"metrics_url": found.url + "metrics?format=json", "metrics_auth": self.metrics_auth(found, key[0])}
