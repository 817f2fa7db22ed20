"""What a claim in a workspace's namespace holds: a workspace volume (a notebook's home too) or a dataset
version. The node agents report the kubelet's volume stats per claim (namespace and name); billing finds here
which workspace's volume or version those bytes are, to bill its owner."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.backends.kubernetes.config import KubernetesConfig
from scheduling.backends.kubernetes.manifests import (
    dataset_claim_name,
    namespace_name,
    workspace_volume_claim_name,
)
from scheduling.models import DatasetVersion, Volume


@dataclass(frozen=True)
class ClaimedStorage:
    workspace_id: int  # the owner, who is billed (a dataset version mounted by a grantee too)
    kind: str  # "volume" or "dataset"
    name: str  # the volume's name, or dataset@vN
    storage_class: str | None  # a dataset version has none of its own


def claim_index(config: KubernetesConfig | None = None) -> dict[tuple[str, str], ClaimedStorage]:
    """(namespace, claim name) -> what it holds, for every volume and dataset version there is."""
    config = config or KubernetesConfig.from_env()
    index: dict[tuple[str, str], ClaimedStorage] = {}
    for volume in Volume.objects.select_related("workspace"):
        claim = workspace_volume_claim_name(volume.name, volume.home_of)
        key = (namespace_name(config, volume.workspace.slug), claim)
        index[key] = ClaimedStorage(volume.workspace_id, "volume", volume.name, volume.storage_class)
    versions = DatasetVersion.objects.select_related("dataset__workspace").prefetch_related("dataset__shared_with")
    for version in versions:
        dataset = version.dataset
        owner = dataset.workspace.slug
        held = ClaimedStorage(dataset.workspace_id, "dataset", f"{dataset.name}@v{version.number}", None)
        claim = dataset_claim_name(owner, dataset.name, version.number)
        for slug in (owner, *(w.slug for w in dataset.shared_with.all())):
            index[(namespace_name(config, slug), claim)] = held
    return index
