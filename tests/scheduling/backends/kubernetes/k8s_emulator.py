"""A small emulated Kubernetes API server for tests: real HTTP on 127.0.0.1, the JSON API of the core
resources the backend uses (nodes, namespaces, resourcequotas, pods incl. watch streams and logs,
services, configmaps, persistentvolumeclaims), coordination.k8s.io/v1 leases and snapshot.storage.k8s.io/v1
volumesnapshots and volumesnapshotcontents (with a snapshot controller that binds and readies them),
resourceVersions (a stale
update is a 409), label and field selectors, 410 Gone after compaction, a
kubelet that admits or rejects pods bound with nodeName by the node's extended resources,
injectable faults (status codes with Retry-After, slow answers), hooks run before a request (another
client writing in between) and HTTPS with a given certificate (as the in-cluster endpoint is).

kmock (0.8) was tried first: it keeps no resourceVersions, ignores label selectors, replays every
object on each watch and has no pods/log, so a fault layer in front of it would have had to
re-implement all of that; this stdlib server is smaller than that layer.

Usage:
    with KubeEmulator() as api:
        api.add_node(...)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
"""

from __future__ import annotations

import copy
import json
import re
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

CORE_NAMESPACED = {"pods", "services", "configmaps", "resourcequotas", "persistentvolumeclaims", "secrets"}
# resources of named API groups, served under /apis/<group/version>/namespaces/<ns>/<plural>
GROUPS = {"leases": "coordination.k8s.io/v1", "volumesnapshots": "snapshot.storage.k8s.io/v1"}
# cluster-scoped resources of named API groups, served under /apis/<group/version>/<plural>
CLUSTER_GROUPS = {"volumesnapshotcontents": "snapshot.storage.k8s.io/v1"}
NAMESPACED = CORE_NAMESPACED | set(GROUPS)
CORE_CLUSTER_SCOPED = {"nodes", "namespaces", "persistentvolumes"}
CLUSTER_SCOPED = CORE_CLUSTER_SCOPED | set(CLUSTER_GROUPS)
KINDS = {"pods": "Pod", "services": "Service", "configmaps": "ConfigMap", "resourcequotas": "ResourceQuota",
         "nodes": "Node", "namespaces": "Namespace", "leases": "Lease",
         "persistentvolumeclaims": "PersistentVolumeClaim", "secrets": "Secret",
         "persistentvolumes": "PersistentVolume", "volumesnapshots": "VolumeSnapshot", "volumesnapshotcontents": "VolumeSnapshotContent"}
SNAPSHOT_DRIVER = "ebs.csi.aws.com"
TERMINAL = ("Succeeded", "Failed")


@dataclass
class Fault:
    """Answer matching requests with `status` (or delay them) `times` times."""

    method: str  # GET, POST, ... or "*"
    path: str  # regex searched in the path
    status: int = 500
    times: int = 1
    retry_after: int | None = None
    delay_s: float = 0.0  # sleep before answering (a client read timeout shorter than this fires)
    watch: bool | None = None  # None: any; True: only watch requests; False: only non-watch
    hits: int = 0

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        return (self.times > 0 and self.method in ("*", method) and re.search(self.path, path) is not None
                and (self.watch is None or self.watch == is_watch))


@dataclass
class Event:
    rv: int
    plural: str
    type: str
    obj: dict


@dataclass
class Store:
    objects: dict[tuple[str, str, str], dict] = field(default_factory=dict)  # (plural, ns, name) -> obj
    events: list[Event] = field(default_factory=list)
    rv: int = 100
    compacted_rv: int = 0  # watches from a resourceVersion below this get 410 Gone


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def status_body(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def parse_selector(text: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """`a=b,c!=d,e,!f,g in (x,y),h notin (z)` -> [(key, op, values)]."""
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for part in re.findall(r"[^,(]+(?:\([^)]*\))?", text or ""):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", part)
        if m:
            out.append((m[1], m[2], tuple(v.strip() for v in m[3].split(","))))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            out.append((k.strip(), "!=", (v.strip(),)))
        elif "=" in part:
            k, v = part.replace("==", "=").split("=", 1)
            out.append((k.strip(), "=", (v.strip(),)))
        elif part.startswith("!"):
            out.append((part[1:], "!", ()))
        else:
            out.append((part, "exists", ()))
    return out


def selector_matches(selector: list[tuple[str, str, tuple[str, ...]]], values: dict[str, str]) -> bool:
    for key, op, vals in selector:
        have = values.get(key)
        ok = {"=": have == vals[0] if vals else False, "!=": have != vals[0] if vals else True,
              "in": have in vals, "notin": have not in vals, "exists": have is not None, "!": have is None}[op]
        if not ok:
            return False
    return True


def field_values(obj: dict) -> dict[str, str]:
    meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status", {})
    return {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", ""),
            "spec.nodeName": spec.get("nodeName", ""), "status.phase": status.get("phase", "")}


def merge(base: dict, patch: dict) -> dict:
    """JSON merge patch (RFC 7386): null deletes, dicts merge, the rest replaces."""
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def parse_quantity(q: object) -> float:
    s = str(q)
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}
    for unit, factor in units.items():
        if s.endswith(unit):
            return float(s[: -len(unit)]) * factor
    return float(s)


class KubeEmulator:
    """The server. All state is guarded by one condition variable; watches wait on it."""

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        self.tls = tls  # (certificate, key): serve HTTPS
        self.store = Store()
        self.cond = threading.Condition()
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, dict]] = []  # (method, path, query) of every request
        self.authorizations: list[str] = []  # the Authorization header of every request
        self.hooks: list[tuple[str, str, object]] = []  # (method, path regex, fn()): run once, before answering
        self.logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> log text
        self.kubelet = True  # admit pods bound to nodes (Failed OutOf<resource> when they do not fit)
        self.graceful_pods = False  # DELETE only marks pods Terminating until finish_terminating()
        self.snapshotter = True  # the snapshot controller: cut, bind and ready VolumeSnapshots as they are made
        self.server: ThreadingHTTPServer | None = None

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> KubeEmulator:
        emulator = self

        class Handler(_Handler):
            api = emulator

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            with self.cond:
                self.cond.notify_all()
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self.server is not None, "emulator not started"
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"

    @property
    def port(self) -> int:
        assert self.server is not None, "emulator not started"
        return self.server.server_address[1]

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig (JSON is valid YAML) whose current context points at this server."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "test-token"}}],
            "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "tester"}}],
        }
        Path(path).write_text(json.dumps(config))
        return Path(path)

    # --- test helpers ------------------------------------------------------------------------------
    def add_node(self, name: str, *, capacity: dict[str, object] | None = None, labels: dict | None = None,
                 annotations: dict | None = None, taints: list[dict] | None = None, ready: bool = True,
                 unschedulable: bool = False) -> dict:
        cap = {"cpu": "32", "memory": "256Gi", "pods": "110", **{k: str(v) for k, v in (capacity or {}).items()}}
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
            "spec": {"unschedulable": unschedulable, "taints": list(taints or [])},
            "status": {"capacity": cap, "allocatable": dict(cap),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
        }
        with self.cond:
            return self._create("nodes", "", node)

    def create(self, plural: str, namespace: str, obj: dict) -> dict:
        """Another client's create (a namespace is made when missing): what other schedulers or users do."""
        with self.cond:
            if plural in NAMESPACED and ("namespaces", "", namespace) not in self.store.objects:
                self._create("namespaces", "", {"metadata": {"name": namespace}})
            return self._create(plural, namespace, obj)

    def delete(self, plural: str, namespace: str, name: str) -> dict:
        with self.cond:
            return self._delete(plural, namespace, name)

    def get(self, plural: str, namespace: str, name: str) -> dict | None:
        with self.cond:
            obj = self.store.objects.get((plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def list(self, plural: str, namespace: str | None = None, labels: str = "") -> list[dict]:
        sel = parse_selector(labels)
        with self.cond:
            return [copy.deepcopy(o) for (p, ns, _), o in sorted(self.store.objects.items())
                    if p == plural and (namespace is None or ns == namespace)
                    and selector_matches(sel, o["metadata"].get("labels", {}))]

    def set_pod_phase(self, namespace: str, name: str, phase: str, *, reason: str = "", message: str = "",
                      exit_code: int | None = None) -> dict:
        """What the kubelet would report: the phase, start and finish times, a container state."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with self.cond:
            pod = self.store.objects[("pods", namespace, name)]
            status = dict(pod.get("status", {}), phase=phase)
            if reason:
                status["reason"] = reason
            if message:
                status["message"] = message
            if phase in ("Running", *TERMINAL):
                status.setdefault("startTime", now)
            if phase == "Running":
                state = {"running": {"startedAt": now}}
            elif phase in TERMINAL:
                code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
                state = {"terminated": {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                                        "startedAt": status["startTime"], "finishedAt": now}}
            else:
                state = {"waiting": {"reason": reason or "ContainerCreating"}}
            status["containerStatuses"] = [{"name": "main", "ready": phase == "Running", "state": state}]
            return self._update("pods", namespace, name, merge(pod, {"status": status}))

    def ready_snapshots(self) -> None:
        """The snapshot controller catches up: every VolumeSnapshot not bound yet is cut and bound now."""
        with self.cond:
            for (plural, ns, name), obj in sorted(self.store.objects.items()):
                if plural == "volumesnapshots" and not (obj.get("status") or {}).get("readyToUse"):
                    self._bind_snapshot(ns, name)

    def _bind_snapshot(self, namespace: str, name: str) -> None:
        """A dynamic snapshot of a claim gets a content with a new handle (Delete, as a class's default); a
        pre-provisioned one binds to the content it names."""
        snapshot = self.store.objects[("volumesnapshots", namespace, name)]
        source = snapshot.get("spec", {}).get("source", {})
        if source.get("persistentVolumeClaimName"):
            claim = self.store.objects.get(("persistentvolumeclaims", namespace, source["persistentVolumeClaimName"]))
            if claim is None:
                return  # the controller reports an error and waits
            size = claim["spec"]["resources"]["requests"]["storage"]
            content = self._create("volumesnapshotcontents", "", {
                "metadata": {"name": f"snapcontent-{snapshot['metadata']['uid']}"},
                "spec": {"deletionPolicy": "Delete", "driver": SNAPSHOT_DRIVER,
                         "volumeSnapshotClassName": snapshot["spec"].get("volumeSnapshotClassName", "default"),
                         "source": {"volumeHandle": f"vol-{claim['metadata']['uid']}"},
                         "volumeSnapshotRef": {"name": name, "namespace": namespace}}})
            content["status"] = {"snapshotHandle": f"snap-{uuid.uuid4().hex[:12]}", "readyToUse": True,
                                 "restoreSize": int(parse_quantity(size))}
            self._update("volumesnapshotcontents", "", content["metadata"]["name"], content)
        else:
            content = self.store.objects.get(("volumesnapshotcontents", "", source.get("volumeSnapshotContentName")))
            if content is None:
                return
            # the driver reports the handle's snapshot: its size is the original's
            handle = content["spec"]["source"].get("snapshotHandle")
            restore = next((c["status"]["restoreSize"] for (p, _, _), c in self.store.objects.items()
                            if p == "volumesnapshotcontents" and (c.get("status") or {}).get("snapshotHandle") == handle
                            and "restoreSize" in c["status"]), 0)
            self._update("volumesnapshotcontents", "", content["metadata"]["name"], merge(content, {"status": {
                "snapshotHandle": handle, "readyToUse": True, "restoreSize": restore}}))
            size = f"{restore // 2**30}Gi"
        self._update("volumesnapshots", namespace, name, merge(snapshot, {"status": {
            "boundVolumeSnapshotContentName": content["metadata"]["name"], "readyToUse": True,
            "restoreSize": size}}))

    def compact(self) -> None:
        """Forget the event history, as etcd compaction does: older watches get 410 Gone."""
        with self.cond:
            self.store.compacted_rv = self.store.rv
            self.store.events.clear()

    def fail(self, method: str, path: str, status: int = 500, **kw: object) -> Fault:
        fault = Fault(method, path, status, **kw)  # type: ignore[arg-type]
        with self.cond:
            self.faults.append(fault)
        return fault

    def before(self, method: str, path: str, fn) -> None:
        """Run fn() once, before answering the next `method` request whose path matches."""
        with self.cond:
            self.hooks.append((method, path, fn))

    def update(self, plural: str, namespace: str, name: str, change) -> dict:
        """Another client's read-modify-write: change(obj) edits a copy, stored with a new resourceVersion."""
        with self.cond:
            obj = copy.deepcopy(self.store.objects[(plural, namespace, name)])
            change(obj)
            return self._update(plural, namespace, name, obj)

    def count(self, method: str, path: str) -> int:
        return sum(1 for m, p, _ in self.requests if m == method and re.search(path, p))

    # --- storage (call with self.cond held) --------------------------------------------------------
    def _bump(self, plural: str, type_: str, obj: dict) -> None:
        self.store.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.store.rv)
        self.store.events.append(Event(self.store.rv, plural, type_, copy.deepcopy(obj)))
        self.cond.notify_all()

    def _create(self, plural: str, namespace: str, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = meta["generateName"] + uuid.uuid4().hex[:5]
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name):
            raise ApiError(422, "Invalid", f"{KINDS[plural]} {name!r} is invalid: metadata.name")
        if plural in NAMESPACED:
            if ("namespaces", "", namespace) not in self.store.objects:
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
            meta["namespace"] = namespace
        key = (plural, namespace, name)
        if key in self.store.objects:
            raise ApiError(409, "AlreadyExists", f'{plural} "{name}" already exists')
        meta.update(name=name, uid=str(uuid.uuid4()),
                    creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        check_micro_times(plural, obj)
        obj.setdefault("apiVersion", GROUPS.get(plural) or CLUSTER_GROUPS.get(plural, "v1"))
        obj["kind"] = KINDS[plural]
        if plural == "pods":
            obj["status"] = self._admit(obj)
        if plural == "services" and obj.get("spec", {}).get("clusterIP") != "None":
            obj.setdefault("spec", {})["clusterIP"] = f"10.96.0.{len(self.store.objects) % 250 + 1}"
        self.store.objects[key] = obj
        self._bump(plural, "ADDED", obj)
        if plural == "volumesnapshots" and self.snapshotter:
            self._bind_snapshot(namespace, name)
            obj = self.store.objects[key]
        return copy.deepcopy(obj)

    def _admit(self, pod: dict) -> dict:
        """The kubelet of a pod bound by nodeName: reject it when its node lacks the resources."""
        node_name = pod.get("spec", {}).get("nodeName")
        if not node_name or not self.kubelet:
            return {"phase": "Pending"}
        node = self.store.objects.get(("nodes", "", node_name))
        if node is None:
            return {"phase": "Pending"}  # a real pod bound to a missing node waits forever
        allocatable = node["status"].get("allocatable", {})
        used: dict[str, float] = {}
        for (p, _, _), other in self.store.objects.items():
            if p == "pods" and other["spec"].get("nodeName") == node_name \
                    and other.get("status", {}).get("phase") not in TERMINAL:
                for res, q in pod_requests(other).items():
                    used[res] = used.get(res, 0) + q
        for res, q in pod_requests(pod).items():
            if "/" in res and used.get(res, 0) + q > parse_quantity(allocatable.get(res, 0)):
                return {"phase": "Failed", "reason": f"OutOf{res}",
                        "message": f"Pod was rejected: Node didn't have enough resource: {res}"}
        return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}

    def _update(self, plural: str, namespace: str, name: str, new: dict) -> dict:
        key = (plural, namespace, name)
        old = self.store.objects.get(key)
        if old is None:
            raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
        want_rv = new.get("metadata", {}).get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {plural} "{name}": '
                                            "the object has been modified")
        check_micro_times(plural, new)
        new = copy.deepcopy(new)
        new["metadata"] = {**new.get("metadata", {}), **{k: old["metadata"][k] for k in
                                                         ("name", "uid", "creationTimestamp")}}
        if namespace:
            new["metadata"]["namespace"] = namespace
        new["kind"], new["apiVersion"] = old["kind"], old.get("apiVersion", "v1")
        self.store.objects[key] = new
        self._bump(plural, "MODIFIED", new)
        return copy.deepcopy(new)

    def _delete(self, plural: str, namespace: str, name: str) -> dict:
        obj = self.store.objects.get((plural, namespace, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
        grace = obj.get("spec", {}).get("terminationGracePeriodSeconds", 30)
        if plural == "pods" and self.graceful_pods and grace:
            if not obj["metadata"].get("deletionTimestamp"):  # the kubelet stops it first
                obj["metadata"].update(deletionTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                       deletionGracePeriodSeconds=grace)
                self._bump(plural, "MODIFIED", obj)
            return copy.deepcopy(obj)
        del self.store.objects[(plural, namespace, name)]
        self._bump(plural, "DELETED", obj)
        bound = (obj.get("status") or {}).get("boundVolumeSnapshotContentName")
        content = self.store.objects.get(("volumesnapshotcontents", "", bound)) if plural == "volumesnapshots" else None
        if content is not None and content["spec"].get("deletionPolicy") == "Delete":
            self._delete("volumesnapshotcontents", "", bound)  # the controller deletes the storage's snapshot
        return copy.deepcopy(obj)

    def finish_terminating(self) -> None:
        """The kubelet has stopped every Terminating pod: they go."""
        with self.cond:
            for (plural, ns, name), obj in sorted(self.store.objects.items()):
                if plural == "pods" and obj["metadata"].get("deletionTimestamp"):
                    del self.store.objects[(plural, ns, name)]
                    self._bump(plural, "DELETED", obj)

    def _select(self, plural: str, namespace: str | None, query: dict) -> callable:
        labels = parse_selector(query.get("labelSelector", ""))
        fields = parse_selector(query.get("fieldSelector", ""))

        def ok(obj: dict) -> bool:
            meta = obj.get("metadata", {})
            return ((namespace is None or meta.get("namespace", "") == namespace)
                    and selector_matches(labels, meta.get("labels", {}) or {})
                    and selector_matches(fields, field_values(obj)))
        return ok


MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")


def check_micro_times(plural: str, obj: dict) -> None:
    """A Lease's times are MicroTime (RFC 3339 with exactly six fraction digits), or the server refuses it."""
    if plural != "leases":
        return
    for key in ("acquireTime", "renewTime"):
        value = (obj.get("spec") or {}).get(key)
        if value is not None and not MICRO_TIME.fullmatch(str(value)):
            raise ApiError(400, "BadRequest", f"spec.{key}: {value!r} is not a MicroTime")


def pod_requests(pod: dict) -> dict[str, float]:
    """Summed container limits (extended resources) or requests of a pod."""
    total: dict[str, float] = {}
    for c in pod.get("spec", {}).get("containers", []):
        res = c.get("resources", {}) or {}
        merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for k, v in merged.items():
            total[k] = total.get(k, 0) + parse_quantity(v)
    return total


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients that drop a watch reset the connection: expected, not worth a traceback


class _Handler(BaseHTTPRequestHandler):
    api: KubeEmulator
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # --- plumbing ----------------------------------------------------------------------------------
    def _send(self, code: int, body: object, headers: dict | None = None, content_type: str = "application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}") if n else {}

    def _serve(self, method: str) -> None:
        api = self.api
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        is_watch = query.get("watch") in ("true", "1")
        body = self._body() if method in ("POST", "PUT", "PATCH") else {}
        with api.cond:
            api.requests.append((method, url.path, query))
            api.authorizations.append(self.headers.get("Authorization") or "")
            hook = next((h for h in api.hooks if h[0] == method and re.search(h[1], url.path)), None)
            if hook:
                api.hooks.remove(hook)
        if hook:
            hook[2]()
        with api.cond:
            fault = next((f for f in api.faults if f.matches(method, url.path, is_watch)), None)
            if fault:
                fault.times -= 1
                fault.hits += 1
        if fault:
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.status:
                headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
                reason = {409: "AlreadyExists", 410: "Gone", 429: "TooManyRequests"}.get(fault.status, "InternalError")
                self._send(fault.status, status_body(fault.status, reason, "injected fault"), headers)
                return
        try:
            route = self._route(url.path)
            if route is None:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource {url.path}")
            plural, namespace, name, sub = route
            if sub == "log":
                self._serve_log(namespace, name, query)
            elif method == "GET" and name is None and is_watch:
                self._serve_watch(plural, namespace, query)
            else:
                self._send(*self._crud(method, plural, namespace, name, body, query))
        except ApiError as e:
            self._send(e.code, status_body(e.code, e.reason, e.message))
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _route(path: str) -> tuple[str, str | None, str | None, str | None] | None:
        """-> (plural, namespace or None, name or None, subresource or None)."""
        group = re.fullmatch(r"/apis/([a-z0-9.]+/v[0-9a-z]+)/namespaces/([^/]+)/([a-z]+)(?:/([^/]+))?/?", path)
        if group:
            version, ns, plural, name = group.groups()
            return (plural, ns, name, None) if GROUPS.get(plural) == version else None
        cluster_group = re.fullmatch(r"/apis/([a-z0-9.]+/v[0-9a-z]+)/([a-z]+)(?:/([^/]+))?/?", path)
        if cluster_group:
            version, plural, name = cluster_group.groups()
            return (plural, None, name, None) if CLUSTER_GROUPS.get(plural) == version else None
        if path == "/api/v1" or not path.startswith("/api/v1/"):
            return None
        parts = path[len("/api/v1/"):].strip("/").split("/")
        if parts[0] == "namespaces" and len(parts) >= 3:
            ns, plural, rest = parts[1], parts[2], parts[3:]
            if plural not in CORE_NAMESPACED or len(rest) > 2:
                return None
            return plural, ns, rest[0] if rest else None, rest[1] if len(rest) > 1 else None
        plural, rest = parts[0], parts[1:]
        if plural not in CORE_NAMESPACED | CORE_CLUSTER_SCOPED or len(rest) > 2:
            return None
        return plural, None, rest[0] if rest else None, rest[1] if len(rest) > 1 else None

    def _crud(self, method: str, plural: str, namespace: str | None, name: str | None, body: dict,
              query: dict) -> tuple[int, dict]:
        api, ns = self.api, namespace or ""
        with api.cond:
            if method == "GET" and name is None:
                ok = api._select(plural, namespace, query)
                items = [copy.deepcopy(o) for (p, _, _), o in sorted(api.store.objects.items())
                         if p == plural and ok(o)]
                return 200, {"kind": KINDS[plural] + "List", "apiVersion": "v1",
                             "metadata": {"resourceVersion": str(api.store.rv)}, "items": items}
            if method == "GET":
                obj = api.store.objects.get((plural, ns, name))
                if obj is None:
                    raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
                return 200, copy.deepcopy(obj)
            if method == "POST" and name is None:
                return 201, api._create(plural, ns, body)
            if method == "PUT" and name:
                return 200, api._update(plural, ns, name, body)
            if method == "PATCH" and name:
                old = api.store.objects.get((plural, ns, name))
                if old is None:
                    raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
                patched = merge(old, body)
                patched["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                return 200, api._update(plural, ns, name, patched)
            if method == "DELETE" and name:
                return 200, api._delete(plural, ns, name)
        raise ApiError(405, "MethodNotAllowed", f"{method} not allowed here")

    def _serve_log(self, namespace: str | None, name: str | None, query: dict) -> None:
        api = self.api
        with api.cond:
            if ("pods", namespace or "", name or "") not in api.store.objects:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            text = api.logs.get((namespace or "", name or ""), "")
        tail = query.get("tailLines")
        if tail is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(tail):]) if int(tail) > 0 else ""
        self._send(200, text, content_type="text/plain")

    def _serve_watch(self, plural: str, namespace: str | None, query: dict) -> None:
        """A chunked stream of events after `resourceVersion` until `timeoutSeconds` (or the client) ends it."""
        api = self.api
        ok = api._select(plural, namespace, query)
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 300)
        rv_text = query.get("resourceVersion") or "0"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(event: dict) -> None:
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        with api.cond:
            since = int(rv_text)
            if since == 0:  # "any": the current state as synthetic ADDED events, then changes
                pending = [{"type": "ADDED", "object": copy.deepcopy(o)}
                           for (p, _, _), o in sorted(api.store.objects.items()) if p == plural and ok(o)]
                since = api.store.rv
            elif since < api.store.compacted_rv:
                pending = [{"type": "ERROR", "object": status_body(
                    410, "Expired", f"too old resource version: {since} ({api.store.compacted_rv})")}]
                deadline = 0.0
            else:
                pending = []
        try:
            while True:
                for event in pending:
                    chunk(event)
                if time.monotonic() >= deadline or api.server is None:
                    break
                with api.cond:
                    news = [e for e in api.store.events if e.rv > since and e.plural == plural]
                    if not news:
                        api.cond.wait(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                        news = [e for e in api.store.events if e.rv > since and e.plural == plural]
                    if news:
                        since = news[-1].rv
                pending = [{"type": e.type, "object": copy.deepcopy(e.obj)} for e in news if ok(e.obj)]
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self.close_connection = True
