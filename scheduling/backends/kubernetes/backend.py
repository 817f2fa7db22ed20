"""The Kubernetes backend: the scheduling cycle's decisions applied to a real cluster through the official
`kubernetes` client.

- inventory(): Node objects -> NodeInventory (GPU resources and labels, pool label, spot, Ready, cordon).
- sync_workspace(): a namespace per workspace with a ResourceQuota mirroring its GPU quota.
- launch(): a Pod bound to the chosen node with `nodeName` (the scheduler already placed it), asking for
  the extended resource of its sharing mode; fractions are pinned to their GPU through the environment
  and each shared GPU is held whole by a reservation pod (as Run:ai does); PyTorch / MPI jobs get a
  headless Service (rank-<r>.job-<id>.<ns>.svc, rank 0 = MASTER_ADDR) and an MPI hostfile ConfigMap.
- a notebook (launch shape jupyter): its pod serves on port 8888 under its base URL with its token, mounts
  its home volume's PersistentVolumeClaim (made at the first launch, grown with the volume, kept when the pod
  goes, deleted by delete_home()), and a ClusterIP Service the portal's proxy reaches (endpoint(): no API
  call).
- statuses(): a local cache of the platform's pods fed by a list, then a watch resumed from the last
  resourceVersion at every call (drained until idle); 410 Gone -> relist.
- evict() / forget(): delete the pod, and the reservation with the last fraction on its GPU.
- logs(): the pod log API (tailLines); the cycle reads it just before evict() / forget(), since a deleted
  pod's log is gone (scheduling.logs keeps it).
Every call retries 429 / 5xx / timeouts with capped backoff; 409 on create and 404 on delete are success,
so every method is idempotent and an interrupted cycle can simply run again.
No Django import: settings come from KubernetesConfig (environment variables K8S_*).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import urllib3
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.incluster_config import InClusterConfigLoader
from kubernetes.watch.watch import iter_resp_lines

from scheduling.backends.base import (
    JUPYTER,
    MODEL_SERVER,
    SSH_SIDECAR_PORT,
    Endpoint,
    NodeInventory,
    ReplicaKey,
    ReplicaLaunch,
    ReplicaStatus,
    SshEndpoint,
)
from scheduling.kinds import stored_launch_type

from . import manifests as m
from . import snapshots
from .config import KubernetesConfig
from .lease import LeaderLease, LostLeadership, default_identity
from .retry import KubernetesApiError, call_with_retry, detail_of

__all__ = ["KubernetesBackend", "KubernetesConfig", "KubernetesApiError", "LostLeadership", "PodCache",
           "make_api_client"]

PodRef = tuple[str, str]  # (namespace, name)


def make_api_client(config: KubernetesConfig) -> client.ApiClient:
    """An ApiClient from the kubeconfig file, or from the pod's service account in a cluster. The client's own
    urllib3 retries are off: the backend retries itself, with backoff and Retry-After."""
    configuration = client.Configuration()
    if config.uses_service_account():
        # the token is read again every minute: projected service-account tokens rotate
        InClusterConfigLoader(token_filename=os.path.join(config.service_account_dir, "token"),
                              cert_filename=os.path.join(config.service_account_dir, "ca.crt"),
                              try_refresh_token=True).load_and_set(configuration)
    else:
        kube_config.load_kube_config(config_file=config.kubeconfig, context=config.context,
                                     client_configuration=configuration)
    configuration.retries = False
    return client.ApiClient(configuration)


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class PodCache:
    """The platform's pods as last seen: replaced by a list, then updated by watch events and by what this
    backend itself created or deleted (so a cycle sees its own launches before the watch reports them).
    Live replica pods are indexed by replica key and by the shared GPUs they hold."""

    def __init__(self) -> None:
        self.pods: dict[PodRef, dict] = {}
        self.resource_version: str | None = None
        self.deleted_uids: set[str] = set()  # deleted by us, events still in flight: ignore all but DELETED
        self.stopping: dict[str, ReplicaKey] = {}  # replica pods deleted by us and not gone yet, by uid
        self._by_key: dict[ReplicaKey, PodRef] = {}
        self._holders: dict[tuple[str, int], set[PodRef]] = {}

    @staticmethod
    def ref(pod: dict) -> PodRef:
        return pod["metadata"].get("namespace", ""), pod["metadata"]["name"]

    @staticmethod
    def is_live(pod: dict) -> bool:
        return not pod["metadata"].get("deletionTimestamp")

    def _set(self, pod: dict) -> None:
        ref = self.ref(pod)
        self._unset(ref)
        self.pods[ref] = pod
        if self.is_live(pod) and m.is_replica(pod):
            self._by_key[m.replica_key(pod)] = ref
            for held in m.held_gpus(pod):
                self._holders.setdefault(held, set()).add(ref)

    def _unset(self, ref: PodRef) -> dict | None:
        pod = self.pods.pop(ref, None)
        if pod is not None and self.is_live(pod) and m.is_replica(pod):
            if self._by_key.get(m.replica_key(pod)) == ref:
                del self._by_key[m.replica_key(pod)]
            for held in m.held_gpus(pod):
                self._holders.get(held, set()).discard(ref)
        return pod

    def replace(self, items: Iterable[dict], resource_version: str) -> None:
        items = list(items)
        self.deleted_uids &= {p["metadata"].get("uid") for p in items}
        self.stopping = {uid: key for uid, key in self.stopping.items() if uid in self.deleted_uids}
        self.pods, self._by_key, self._holders = {}, {}, {}
        for pod in items:
            if pod["metadata"].get("uid") not in self.deleted_uids:
                self._set(pod)
        self.resource_version = resource_version

    def apply(self, event_type: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("resourceVersion"):
            self.resource_version = meta["resourceVersion"]
        if event_type == "BOOKMARK":
            return
        ref, uid = self.ref(obj), meta.get("uid")
        if event_type == "DELETED":
            self.deleted_uids.discard(uid)
            self.stopping.pop(uid, None)
            if ref in self.pods and self.pods[ref]["metadata"].get("uid") == uid:
                self._unset(ref)
        elif uid not in self.deleted_uids:
            self._set(obj)

    def put(self, pod: dict) -> None:
        """A pod this backend created or read; the resume point stays where the watch left off."""
        self._set(pod)

    def drop(self, ref: PodRef) -> None:
        pod = self._unset(ref)
        if pod is not None and pod["metadata"].get("uid"):
            self.deleted_uids.add(pod["metadata"]["uid"])
            if m.is_replica(pod):
                self.stopping[pod["metadata"]["uid"]] = m.replica_key(pod)

    def live(self) -> list[dict]:
        """Pods not being deleted."""
        return [p for p in self.pods.values() if self.is_live(p)]

    def replica(self, key: ReplicaKey) -> dict | None:
        ref = self._by_key.get(key)
        return self.pods[ref] if ref else None

    def holders(self, node: str, gpu: int) -> list[dict]:
        """Live fraction pods sharing this GPU (whatever their phase: forget() is what frees a GPU)."""
        return [self.pods[ref] for ref in sorted(self._holders.get((node, gpu), ()))]

    def shared_gpus(self) -> dict[tuple[str, int], list[dict]]:
        """(node, GPU) -> the live fraction pods on it, for every GPU that has some."""
        return {held: [self.pods[r] for r in sorted(refs)] for held, refs in sorted(self._holders.items()) if refs}

    def replicas(self) -> list[dict]:
        return [self.pods[ref] for ref in self._by_key.values()]


_SHARED: dict[tuple[int, KubernetesConfig], KubernetesBackend] = {}
_SHARED_LOCK = threading.Lock()


class KubernetesBackend:
    name = "kubernetes"
    pods_linger = True   # a deleted pod stops in its own time (SIGTERM, its grace): the cycle keeps it held

    def __init__(self, config: KubernetesConfig | None = None, *, api_client: client.ApiClient | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time,
                 identity: str | None = None) -> None:
        self.config = config or KubernetesConfig.from_env()
        self.core = client.CoreV1Api(api_client or make_api_client(self.config))
        self.snapshots = snapshots.SnapshotV1Api(self.core.api_client)
        self.identity = identity or default_identity()
        self._leader: LeaderLease | None = None
        self.cache = PodCache()
        self._sleep, self._clock = sleep, clock
        self._vendors: dict[str, str] = {}  # node -> nvidia | amd, from the last inventory
        self._namespaces: set[str] = set()  # namespaces known to exist
        self._secret_digests: dict[tuple[str, str], str] = {}  # Secrets written, by a digest of what they hold
        # grantees' copies of dataset versions whose snapshot was not ready at launch: (owner, dataset, v, grantee)
        self._pending_copies: set[tuple[str, str, int, str]] = set()
        self._lock = threading.RLock()  # one caller at a time: the cache is not shared-safe otherwise

    @classmethod
    def from_env(cls) -> KubernetesBackend:
        """A new backend from the K8S_* environment variables."""
        return cls(KubernetesConfig.from_env())

    @classmethod
    def from_settings(cls) -> KubernetesBackend:
        """The process's backend for the K8S_* environment: one instance per process and settings, so the pod
        cache and the watch's resourceVersion carry over from cycle to cycle. Call it after a fork (Celery
        workers do: the first cycle in each child builds its own)."""
        config = KubernetesConfig.from_env()
        key = (os.getpid(), config)
        with _SHARED_LOCK:
            if key not in _SHARED:
                _SHARED[key] = cls(config)
            return _SHARED[key]

    def close(self) -> None:
        """Release the client's connections."""
        self.core.api_client.close()

    # --- leader election ---------------------------------------------------------------------------------
    @property
    def leader(self) -> LeaderLease:
        """The Lease this process competes for; once it has taken part, only its holder changes the cluster."""
        if self._leader is None:
            cfg = self.config
            self._leader = LeaderLease(self.core.api_client, cfg.lease_name, cfg.lease_namespace_or_own(),
                                       self.identity, cfg.lease_duration_s, request_timeout_s=cfg.request_timeout_s,
                                       clock=self._clock, sleep=self._sleep)
        return self._leader

    def _check_leader(self) -> None:
        # a cycle that outlived its Lease stops writing; the next leader's reconcile finishes its work
        if self._leader is not None and not self._leader.held():
            raise LostLeadership(f"{self.identity} does not hold lease {self._leader.what}")

    # --- API plumbing ----------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[..., Any], *args: Any, text: bool = False, **kwargs: Any) -> Any:
        """fn(...) with retries; the answer as parsed JSON (as text with text=True)."""
        timeout = (self.config.request_timeout_s, self.config.request_timeout_s)

        def once() -> Any:
            data = fn(*args, _preload_content=False, _request_timeout=timeout, **kwargs).data or b""
            return data.decode("utf-8", "replace") if text else json.loads(data or b"{}")

        return call_with_retry(once, what, self.config.retry, self._sleep)

    def _call_unless(self, status: int, what: str, fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        """(True, the answer), or (False, None) when the API answers `status` (409 or 404, which
        a retry or a rerun expects); other errors are raised."""
        try:
            return True, self._call(what, fn, *args)
        except ApiException as e:
            if e.status == status:
                return False, None
            raise KubernetesApiError(what, e.status, detail_of(e)) from e

    def _create(self, what: str, fn: Callable[..., Any], *args: Any) -> dict | None:
        """The created object, or None when it already existed (409: a retry or a rerun)."""
        return self._call_unless(409, f"create {what}", fn, *args)[1]

    def _delete(self, what: str, fn: Callable[..., Any], *args: Any) -> bool:
        """True when deleted now, False when it was already gone (404)."""
        return self._call_unless(404, f"delete {what}", fn, *args)[0]

    def _read(self, what: str, fn: Callable[..., Any], *args: Any) -> dict | None:
        return self._call_unless(404, f"read {what}", fn, *args)[1]

    # --- inventory ---------------------------------------------------------------------------------------
    def inventory(self) -> list[NodeInventory]:
        with self._lock:
            nodes = self._call("list nodes", self.core.list_node).get("items", [])
            inventory = sorted((m.node_inventory(n, self.config) for n in nodes), key=lambda n: n.name)
            self._vendors = {n.name: n.vendor for n in inventory}
            return inventory

    def _vendor(self, replica: ReplicaLaunch) -> str:
        vendor = (replica.slice or {}).get("vendor") or self._vendors.get(replica.node)
        if not vendor:
            node = self._read(f"node {replica.node}", self.core.read_node, replica.node)
            vendor = m.node_inventory(node, self.config).vendor if node else "nvidia"
            self._vendors[replica.node] = vendor
        return vendor

    # --- workspaces --------------------------------------------------------------------------------------
    def _ensure_namespace(self, namespace: str, workspace: str | None) -> None:
        if namespace in self._namespaces:
            return
        self._create(f"namespace {namespace}", self.core.create_namespace, m.namespace_manifest(namespace, workspace))
        self._namespaces.add(namespace)

    def sync_workspace(self, workspace: str, gpu_quota_milli: int | None) -> None:
        with self._lock:
            self._check_leader()
            namespace = m.namespace_name(self.config, workspace)
            self._namespaces.discard(namespace)  # check it really exists: sync is the place to repair
            self._ensure_namespace(namespace, workspace)
            what = f"resourcequota {namespace}/{m.QUOTA_NAME}"
            if gpu_quota_milli is None:
                self._delete(what, self.core.delete_namespaced_resource_quota, m.QUOTA_NAME, namespace)
                return
            quota = m.quota_manifest(workspace, gpu_quota_milli)
            if self._create(what, self.core.create_namespaced_resource_quota, namespace, quota) is None:
                patch = {"metadata": {"annotations": quota["metadata"]["annotations"]}, "spec": quota["spec"]}
                self._call(f"patch {what}", self.core.patch_namespaced_resource_quota, m.QUOTA_NAME, namespace,
                           patch)

    # --- launching ---------------------------------------------------------------------------------------
    def launch(self, replica: ReplicaLaunch) -> None:
        with self._lock:
            self._check_leader()
            if self.cache.replica(replica.key) is not None:
                return
            namespace = m.namespace_name(self.config, replica.workspace)
            vendor = self._vendor(replica)
            pod = m.replica_pod(replica, namespace, vendor, self.config)  # bad input fails before any change
            self._ensure_namespace(namespace, replica.workspace)
            self._ensure_secrets(replica, namespace)
            self._ensure_volume_claims(replica, namespace)
            self._ensure_bucket_mounts(replica, namespace)
            if stored_launch_type(replica.job_type).distributed:
                self._ensure_job_objects(replica, namespace)
            if replica.shape == JUPYTER:
                self._ensure_notebook_objects(replica, namespace)
            if replica.shape == MODEL_SERVER:
                svc = m.inference_service(replica, namespace)
                self._create(f"service {namespace}/{svc['metadata']['name']}", self.core.create_namespaced_service,
                             namespace, svc)
            if m.slice_kind(replica) == "fraction":
                uuids = list(replica.gpu_uuids) + [""] * len(replica.gpus)
                for gpu, uuid in zip(replica.gpus, uuids, strict=False):
                    self._ensure_reservation(replica.node, gpu, uuid, vendor)
            self.cache.put(self._create_pod(pod, replica.workspace))

    def _create_pod(self, pod: dict, workspace: str | None) -> dict:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        what = f"pod {namespace}/{name}"
        try:
            created = self._create(what, self.core.create_namespaced_pod, namespace, pod)
        except KubernetesApiError as e:
            if e.status != 404:  # 404: the namespace vanished under us; make it again, once
                raise
            self._namespaces.discard(namespace)
            self._ensure_namespace(namespace, workspace)
            created = self._create(what, self.core.create_namespaced_pod, namespace, pod)
        if created is None:  # already there: take the server's copy
            created = self._read(what, self.core.read_namespaced_pod, name, namespace)
            if created is None:
                raise KubernetesApiError(f"create {what}", 409, "exists, then vanished while read back")
        return created

    def _ensure_secrets(self, replica: ReplicaLaunch, namespace: str) -> None:
        """The Secrets the pod refers to, written when their value changed since this backend last wrote them
        (an owner replaced it): the pod reads the current value when it starts."""
        for secret in m.replica_secret_objects(replica, namespace, self.config):
            name = secret["metadata"]["name"]
            digest = hashlib.sha256(json.dumps(secret, sort_keys=True).encode()).hexdigest()
            if self._secret_digests.get((namespace, name)) == digest:
                continue
            what = f"secret {namespace}/{name}"
            if self._create(what, self.core.create_namespaced_secret, namespace, secret) is None:
                self._call(f"replace {what}", self.core.replace_namespaced_secret, name, namespace, secret)
            self._secret_digests[(namespace, name)] = digest

    def _ensure_job_objects(self, replica: ReplicaLaunch, namespace: str) -> None:
        svc = m.headless_service(replica, namespace, self.config)
        self._create(f"service {namespace}/{svc['metadata']['name']}", self.core.create_namespaced_service,
                     namespace, svc)
        if stored_launch_type(replica.job_type).mpi_hostfile:
            hostfile = m.mpi_hostfile(replica, namespace)
            name = hostfile["metadata"]["name"]
            if self._create(f"configmap {namespace}/{name}", self.core.create_namespaced_config_map, namespace,
                            hostfile) is None:  # the job grew or shrank since: the hostfile follows
                self._call(f"patch configmap {namespace}/{name}", self.core.patch_namespaced_config_map, name,
                           namespace, {"data": hostfile["data"]})

    def _ensure_volume_claims(self, replica: ReplicaLaunch, namespace: str) -> None:
        """A workspace volume's claim is made when a job first mounts it; one that exists grows to the volume's
        size (claims grow in place; a volume never shrinks). A dataset version's claim is restored from its
        VolumeSnapshot in this namespace: the owner's own, or, for a grantee, a copy (_ensure_snapshot_copy)."""
        for mount in replica.mounts:
            restore_size = ""
            if mount.of_dataset:
                restore_size = self._dataset_snapshot(mount, namespace, replica.workspace)
            self._ensure_claim(m.volume_claim(mount, namespace, replica.workspace, restore_size), namespace)

    def _ensure_claim(self, claim: dict, namespace: str) -> None:
        name = claim["metadata"]["name"]
        what = f"persistentvolumeclaim {namespace}/{name}"
        created = self._create(what, self.core.create_namespaced_persistent_volume_claim, namespace, claim)
        if created is None and "dataSource" not in claim["spec"]:
            self._call(f"patch {what}", self.core.patch_namespaced_persistent_volume_claim, name, namespace,
                       {"spec": {"resources": claim["spec"]["resources"]}})

    def _ensure_bucket_mounts(self, replica: ReplicaLaunch, namespace: str) -> None:
        """The job's Secret (csi-s3), PersistentVolume and claim of each bucket it mounts (m.bucket_objects):
        made by its first replica, shared by the others, removed with its last pod."""
        for obj in m.bucket_objects(replica, namespace):
            name = obj["metadata"]["name"]
            if obj["kind"] == "Secret":  # written again only when the credentials changed since
                digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
                if self._secret_digests.get((namespace, name)) == digest:
                    continue
                what = f"secret {namespace}/{name}"
                if self._create(what, self.core.create_namespaced_secret, namespace, obj) is None:
                    self._call(f"replace {what}", self.core.replace_namespaced_secret, name, namespace, obj)
                self._secret_digests[(namespace, name)] = digest
            elif obj["kind"] == "PersistentVolume":
                self._create(f"persistentvolume {name}", self.core.create_persistent_volume, obj)
            else:
                self._create(f"persistentvolumeclaim {namespace}/{name}",
                             self.core.create_namespaced_persistent_volume_claim, namespace, obj)

    def _remove_bucket_mounts(self, pod: dict, namespace: str, job_id: int) -> None:
        names = ((pod["metadata"].get("annotations") or {}).get(m.BUCKET_MOUNTS) or "").split(",")
        for bucket in filter(None, names):
            claim, volume = m.bucket_claim_name(job_id, bucket), m.bucket_volume_name(namespace, job_id, bucket)
            self._delete(f"persistentvolumeclaim {namespace}/{claim}",
                         self.core.delete_namespaced_persistent_volume_claim, claim, namespace)
            self._delete(f"persistentvolume {volume}", self.core.delete_persistent_volume, volume)
            self._delete(f"secret {namespace}/{claim}", self.core.delete_namespaced_secret, claim, namespace)
            self._secret_digests.pop((namespace, claim), None)

    def _dataset_snapshot(self, mount: Any, namespace: str, workspace: str) -> str:
        """The restoreSize of the dataset version's snapshot in this namespace ("" while not known); a grantee's
        namespace gets its copy first."""
        if mount.workspace != workspace:
            self._ensure_snapshot_copy((mount.workspace, mount.name, mount.version, workspace))
        name = m.dataset_claim_name(mount.workspace, mount.name, mount.version)
        snapshot = self._read(f"volumesnapshot {namespace}/{name}", self.snapshots.read_namespaced_volume_snapshot,
                              name, namespace) or {}
        return str((snapshot.get("status") or {}).get("restoreSize") or "")

    def _ensure_snapshot_copy(self, copy: tuple[str, str, int, str]) -> bool:
        """(owner, dataset, version, grantee): the owner's snapshot as a pre-provisioned one in the grantee's
        namespace (m.snapshot_copy). False while the owner's snapshot is not bound to its content with a
        handle: the grantee's claim waits, and statuses() tries again."""
        owner, dataset, number, grantee = copy
        owner_namespace, namespace = m.namespace_name(self.config, owner), m.namespace_name(self.config, grantee)
        name = m.dataset_claim_name(owner, dataset, number)
        if self._read(f"volumesnapshot {namespace}/{name}", self.snapshots.read_namespaced_volume_snapshot,
                      name, namespace) is not None:
            self._pending_copies.discard(copy)
            return True
        original = self._read(f"volumesnapshot {owner_namespace}/{name}",
                              self.snapshots.read_namespaced_volume_snapshot, name, owner_namespace) or {}
        bound = (original.get("status") or {}).get("boundVolumeSnapshotContentName")
        content = self._read(f"volumesnapshotcontent {bound}", self.snapshots.read_volume_snapshot_content,
                             bound) if bound else None
        if not content or not (content.get("status") or {}).get("snapshotHandle"):
            self._pending_copies.add(copy)
            return False
        copied, snapshot = m.snapshot_copy(content, namespace, name, grantee, owner, dataset, number)
        self._ensure_namespace(namespace, grantee)
        self._create(f"volumesnapshotcontent {copied['metadata']['name']}",
                     self.snapshots.create_volume_snapshot_content, copied)
        self._create(f"volumesnapshot {namespace}/{name}", self.snapshots.create_namespaced_volume_snapshot,
                     namespace, snapshot)
        self._pending_copies.discard(copy)
        return True

    def _retry_pending_copies(self) -> None:
        for copy in sorted(self._pending_copies):
            self._ensure_snapshot_copy(copy)

    def delete_volume(self, workspace: str, name: str) -> None:
        """A deleted workspace volume's claim (none yet: nothing to do)."""
        with self._lock:
            namespace = m.namespace_name(self.config, workspace)
            claim = m.volume_claim_name(name)
            self._delete(f"persistentvolumeclaim {namespace}/{claim}",
                         self.core.delete_namespaced_persistent_volume_claim, claim, namespace)

    # --- dataset versions --------------------------------------------------------------------------------
    def snapshot_volume(self, workspace: str, volume: str, dataset: str, number: int) -> bool:
        """A new dataset version: a VolumeSnapshot of the volume's claim (config.snapshot_class, or the
        cluster's default class for the claim's driver). False, and nothing made, when the volume has no claim
        yet: no job ever mounted it, so it holds nothing to snapshot."""
        with self._lock:
            namespace = m.namespace_name(self.config, workspace)
            claim = m.volume_claim_name(volume)
            if self._read(f"persistentvolumeclaim {namespace}/{claim}",
                          self.core.read_namespaced_persistent_volume_claim, claim, namespace) is None:
                return False
            snapshot = m.volume_snapshot(volume, workspace, dataset, number, namespace, self.config.snapshot_class)
            self._create(f"volumesnapshot {namespace}/{snapshot['metadata']['name']}",
                         self.snapshots.create_namespaced_volume_snapshot, namespace, snapshot)
            return True

    def delete_dataset_version(self, workspace: str, dataset: str, number: int, grantees: Iterable[str] = ()) -> None:
        """A deleted version: the claims restored from it, the grantees' copies, then the owner's VolumeSnapshot
        (whose class's deletionPolicy decides whether the storage's snapshot goes with it)."""
        with self._lock:
            for grantee in grantees:
                self._delete_dataset_copy(workspace, dataset, number, grantee)
            namespace = m.namespace_name(self.config, workspace)
            name = m.dataset_claim_name(workspace, dataset, number)
            self._delete(f"persistentvolumeclaim {namespace}/{name}",
                         self.core.delete_namespaced_persistent_volume_claim, name, namespace)
            self._delete(f"volumesnapshot {namespace}/{name}", self.snapshots.delete_namespaced_volume_snapshot,
                         name, namespace)

    def revoke_dataset(self, workspace: str, dataset: str, numbers: Iterable[int], grantee: str) -> None:
        """A grant withdrawn: the grantee's copies of the dataset's versions and the claims restored from them
        (a claim a running pod still uses goes when the pod does)."""
        with self._lock:
            for number in numbers:
                self._delete_dataset_copy(workspace, dataset, number, grantee)

    def _delete_dataset_copy(self, owner: str, dataset: str, number: int, grantee: str) -> None:
        namespace = m.namespace_name(self.config, grantee)
        name = m.dataset_claim_name(owner, dataset, number)
        content = m.snapshot_copy_content_name(namespace, name)
        self._delete(f"persistentvolumeclaim {namespace}/{name}",
                     self.core.delete_namespaced_persistent_volume_claim, name, namespace)
        self._delete(f"volumesnapshot {namespace}/{name}", self.snapshots.delete_namespaced_volume_snapshot,
                     name, namespace)
        self._delete(f"volumesnapshotcontent {content}", self.snapshots.delete_volume_snapshot_content, content)
        self._pending_copies.discard((owner, dataset, number, grantee))

    def _ensure_notebook_objects(self, replica: ReplicaLaunch, namespace: str) -> None:
        if replica.home is not None:  # an existing claim is the notebook's home from before: its files kept
            self._ensure_claim(m.home_claim(replica, namespace), namespace)
        svc = m.notebook_service(replica, namespace)
        self._create(f"service {namespace}/{svc['metadata']['name']}", self.core.create_namespaced_service,
                     namespace, svc)

    def endpoint(self, key: ReplicaKey, *, workspace: str, base_url: str) -> Endpoint | None:
        """The notebook's or the inference service's Service by its DNS name (reached from inside the cluster,
        where the portal runs); an inference base URL (/serve/...) names a service, whose servers answer at
        their root."""
        namespace = m.namespace_name(self.config, workspace)
        if m.is_inference_base_url(base_url):
            return Endpoint(url=m.inference_url(key[0], namespace))
        return Endpoint(url=m.notebook_url(key[0], namespace, base_url))

    def tensorboard_endpoint(self, job_id: int, workspace: str = "") -> Endpoint | None:
        """The job's TensorBoard container, by the IP of the pod it runs in (the first replica's)."""
        with self._lock:
            pods = [self.cache.pods[ref] for key, ref in self.cache._by_key.items()
                    if key[0] == job_id and ref in self.cache.pods]
        for pod in pods:
            names = {c.get("name") for c in pod.get("spec", {}).get("containers", [])}
            ip = (pod.get("status") or {}).get("podIP")
            if "tensorboard" in names and ip:
                return Endpoint(url=f"http://{ip}:{m.TENSORBOARD_PORT}/")
        return None

    def ssh_endpoint(self, key: ReplicaKey, *, workspace: str = "") -> SshEndpoint | None:
        """The pod's SSH sidecar, by the pod's IP as the watch cache last saw it (the gateway reaches pods directly;
        the chart's network policy lets it)."""
        ref = self.cache._by_key.get(key)
        pod = self.cache.pods.get(ref) if ref else None
        ip = ((pod or {}).get("status") or {}).get("podIP")
        return SshEndpoint(host=ip, port=SSH_SIDECAR_PORT) if ip else None

    def delete_home(self, workspace: str, name: str) -> None:
        with self._lock:
            self._check_leader()
            namespace, claim = m.namespace_name(self.config, workspace), m.home_claim_name(name)
            self._delete(f"persistentvolumeclaim {namespace}/{claim}",
                         self.core.delete_namespaced_persistent_volume_claim, claim, namespace)

    def _ensure_reservation(self, node: str, gpu: int, uuid: str, vendor: str) -> None:
        ns = self.config.reservation_namespace
        ref = (ns, m.reservation_name(node, gpu))
        if ref in self.cache.pods and self.cache.is_live(self.cache.pods[ref]):
            return
        self._ensure_namespace(ns, None)
        self.cache.put(self._create_pod(m.reservation_pod(node, gpu, uuid, vendor, self.config), None))

    def remove_secret(self, workspace: str, *, secret: str = "", registry: str = "") -> None:
        """A deleted workspace secret (or registry credential) leaves the workspace's namespace too."""
        with self._lock:
            namespace = m.namespace_name(self.config, workspace)
            name = m.secret_object_name(secret) if secret else m.pull_secret_name(registry)
            self._delete(f"secret {namespace}/{name}", self.core.delete_namespaced_secret, name, namespace)
            self._secret_digests.pop((namespace, name), None)

    # --- stopping ----------------------------------------------------------------------------------------
    def evict(self, key: ReplicaKey, reason: str) -> None:
        with self._lock:
            self._check_leader()
            self._remove(key)

    def forget(self, key: ReplicaKey) -> None:
        with self._lock:
            self._check_leader()
            self._remove(key)

    def _remove(self, key: ReplicaKey) -> None:
        pod = self.cache.replica(key)
        if pod is None:
            self._sync()  # a fresh process knows nothing yet
            pod = self.cache.replica(key)
        if pod is None:
            return
        ref = self.cache.ref(pod)
        self._delete(f"pod {ref[0]}/{ref[1]}", self.core.delete_namespaced_pod, ref[1], ref[0])
        self.cache.drop(ref)
        for node, gpu in m.held_gpus(pod):
            if not self.cache.holders(node, gpu):
                self._delete_reservation(node, gpu)
        self._remove_job_objects_if_done(pod)

    def _delete_reservation(self, node: str, gpu: int) -> None:
        ref = (self.config.reservation_namespace, m.reservation_name(node, gpu))
        self._delete(f"pod {ref[0]}/{ref[1]}", self.core.delete_namespaced_pod, ref[1], ref[0])
        self.cache.drop(ref)

    def _remove_job_objects_if_done(self, pod: dict) -> None:
        namespace, job_id = pod["metadata"]["namespace"], m.replica_key(pod)[0]
        if self.cache.resource_version is None:  # only what this process launched is known: see the others
            self._sync()
        if any(m.replica_key(p)[0] == job_id and p["metadata"]["namespace"] == namespace
               for p in self.cache.replicas()):
            return
        self._delete(f"service {namespace}/{m.service_name(job_id)}", self.core.delete_namespaced_service,
                     m.service_name(job_id), namespace)
        self._delete(f"configmap {namespace}/{m.hostfile_name(job_id)}", self.core.delete_namespaced_config_map,
                     m.hostfile_name(job_id), namespace)
        if (pod["metadata"].get("labels") or {}).get(m.NOTEBOOK_NAME):  # its home claim stays
            self._delete(f"service {namespace}/{m.notebook_service_name(job_id)}",
                         self.core.delete_namespaced_service, m.notebook_service_name(job_id), namespace)
        if (pod["metadata"].get("labels") or {}).get(m.INFERENCE_NAME):
            self._delete(f"service {namespace}/{m.inference_service_name(job_id)}",
                         self.core.delete_namespaced_service, m.inference_service_name(job_id), namespace)
        if any(c.get("name") == m.SSH_CONTAINER for c in pod.get("spec", {}).get("containers", [])):
            name = m.ssh_secret_name(job_id)
            self._delete(f"secret {namespace}/{name}", self.core.delete_namespaced_secret, name, namespace)
        self._remove_bucket_mounts(pod, namespace, job_id)

    def stopping(self) -> set[ReplicaKey]:
        """Replica pods this backend deleted that are not gone yet (as of the last `statuses`)."""
        with self._lock:
            return set(self.cache.stopping.values())

    # --- watching ----------------------------------------------------------------------------------------
    def statuses(self) -> list[ReplicaStatus]:
        with self._lock:
            self._sync()
            self._reconcile_reservations()
            if self._pending_copies:
                self._retry_pending_copies()
            found = [m.replica_status(p) for p in self.cache.replicas()]
            return sorted(found, key=lambda s: s.key)

    def _sync(self) -> None:
        if self.cache.resource_version is None:
            self._relist()
            return
        try:
            self._drain_watch()
        except _Gone:
            self._relist()

    def _relist(self) -> None:
        data = self._call("list pods", self.core.list_pod_for_all_namespaces, label_selector=m.MANAGED_SELECTOR)
        self.cache.replace(data.get("items", []), data.get("metadata", {}).get("resourceVersion", ""))

    def _drain_watch(self) -> None:
        """Apply every event since the last resourceVersion, until the stream stays idle for watch_idle_s."""
        cfg = self.config

        def open_stream() -> Any:
            return self.core.list_pod_for_all_namespaces(
                watch=True, label_selector=m.MANAGED_SELECTOR, resource_version=self.cache.resource_version,
                allow_watch_bookmarks=True, timeout_seconds=cfg.watch_timeout_s, _preload_content=False,
                _request_timeout=(cfg.request_timeout_s, cfg.request_timeout_s))

        try:
            resp = call_with_retry(open_stream, "watch pods", cfg.retry, self._sleep)
        except ApiException as e:
            if e.status == 410:
                raise _Gone from e
            raise KubernetesApiError("watch pods", e.status, detail_of(e)) from e
        # the headers came within the request timeout; from here on a short silence means "drained"
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if sock is not None:
            sock.settimeout(cfg.watch_idle_s)
        # a busy cluster never goes idle: stop after a while and resume from here next time
        deadline = time.monotonic() + max(2.0, 10 * cfg.watch_idle_s)
        try:
            for line in iter_resp_lines(resp):
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    if (event.get("object") or {}).get("code") == 410:
                        raise _Gone
                    return  # the server ended this watch; the next call resumes from the same place
                self.cache.apply(event["type"], event["object"])
                if time.monotonic() > deadline:
                    return
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError, OSError):
            pass  # idle for watch_idle_s (or the connection dropped): everything so far is applied
        finally:
            resp.close()
            resp.release_conn()

    def _reconcile_reservations(self) -> None:
        """Each shared GPU in use has exactly one reservation: make missing ones, drop orphans (older than a
        grace period, so a launch in another process between its reservation and its pod is left alone)."""
        have = {m.reservation_of(p): p for p in self.cache.live() if m.is_reservation(p)}
        for (node, gpu), holders in self.cache.shared_gpus().items():
            running = [p for p in holders if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            if running and (node, gpu) not in have:
                annotations = running[0]["metadata"].get("annotations") or {}
                self._ensure_reservation(node, gpu, m.gpu_uuid_of(running[0], gpu),
                                         annotations.get(m.P + "vendor", "nvidia"))
        now = self._clock()
        for (node, gpu), res in sorted(have.items()):
            age = now - (m.epoch(res["metadata"].get("creationTimestamp")) or now)
            if not self.cache.holders(node, gpu) and age >= self.config.orphan_grace_s:
                self._delete_reservation(node, gpu)

    # --- logs --------------------------------------------------------------------------------------------
    def logs(self, key: ReplicaKey, tail_lines: int = 200) -> str:
        with self._lock:
            pod = self.cache.replica(key)
            if pod is None:
                self._sync()
                pod = self.cache.replica(key)
            if pod is None:
                return ""
            namespace, name = self.cache.ref(pod)
            try:
                return self._call(f"logs of pod {namespace}/{name}", self.core.read_namespaced_pod_log, name,
                                  namespace, text=True, tail_lines=max(0, int(tail_lines)))
            except ApiException as e:
                if e.status in (400, 404):  # not started yet, or gone
                    return ""
                raise KubernetesApiError(f"logs of pod {namespace}/{name}", e.status, detail_of(e)) from e
