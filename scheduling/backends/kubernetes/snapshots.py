"""The snapshot.storage.k8s.io/v1 objects the backend calls, as typed methods over the client's generic
custom-objects API: the methods' names say which resource and verb each is (the chart's RBAC test reads them
as it reads CoreV1Api's)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from .manifests import SNAPSHOT_GROUP, SNAPSHOT_VERSION

SNAPSHOTS, CONTENTS = "volumesnapshots", "volumesnapshotcontents"


class SnapshotV1Api:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self._objects = client.CustomObjectsApi(api_client)

    def create_namespaced_volume_snapshot(self, namespace: str, body: dict, **kw: Any) -> Any:
        return self._objects.create_namespaced_custom_object(SNAPSHOT_GROUP, SNAPSHOT_VERSION, namespace, SNAPSHOTS,
                                                             body, **kw)

    def read_namespaced_volume_snapshot(self, name: str, namespace: str, **kw: Any) -> Any:
        return self._objects.get_namespaced_custom_object(SNAPSHOT_GROUP, SNAPSHOT_VERSION, namespace, SNAPSHOTS,
                                                          name, **kw)

    def delete_namespaced_volume_snapshot(self, name: str, namespace: str, **kw: Any) -> Any:
        return self._objects.delete_namespaced_custom_object(SNAPSHOT_GROUP, SNAPSHOT_VERSION, namespace, SNAPSHOTS,
                                                             name, **kw)

    def create_volume_snapshot_content(self, body: dict, **kw: Any) -> Any:
        return self._objects.create_cluster_custom_object(SNAPSHOT_GROUP, SNAPSHOT_VERSION, CONTENTS, body, **kw)

    def read_volume_snapshot_content(self, name: str, **kw: Any) -> Any:
        return self._objects.get_cluster_custom_object(SNAPSHOT_GROUP, SNAPSHOT_VERSION, CONTENTS, name, **kw)

    def delete_volume_snapshot_content(self, name: str, **kw: Any) -> Any:
        return self._objects.delete_cluster_custom_object(SNAPSHOT_GROUP, SNAPSHOT_VERSION, CONTENTS, name, **kw)
