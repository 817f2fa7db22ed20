#!/usr/bin/env bash
# OCI images from Debian packages and uv.lock, with no registry but the package indexes:
#   deploy/image/build.sh [--rootfs-only] portal agent     (make image; as root)
# For each NAME, deploy/image/NAME.image declares the image (its Debian packages, its Python packages,
# the project as source or wheel, the entrypoint). Per image:
#   1. mmdebstrap: a bookworm root filesystem from this machine's apt sources (variant essential: no apt,
#      no compilers), then customize.sh in it: a venv from uv.lock (wheels only), the project, the user.
#      -> build/images/NAME.rootfs.tar
#   2. buildah bud (chroot isolation, vfs storage in build/images/.storage) of deploy/image/Dockerfile,
#      FROM scratch + that tarball, pushed to build/images/NAME.oci.tar (an OCI archive, gzip layers).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
IMAGE_DIR=$ROOT/deploy/image
OUT=$ROOT/build/images
UV=${UV:-$ROOT/.tools/bin/uv}
SUITE=bookworm
# Only the mirror this machine is configured with (a deb822 .sources file, or a one-line sources.list).
APT_SOURCES=${APT_SOURCES:-$(ls /etc/apt/sources.list.d/debian.sources 2>/dev/null || echo /etc/apt/sources.list)}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n1)

rootfs_only=0
if [ "${1:-}" = "--rootfs-only" ]; then rootfs_only=1; shift; fi
[ "$#" -gt 0 ] || set -- portal agent
[ "$(id -u)" = 0 ] || { echo "build.sh: mmdebstrap --mode=root and chroot need root" >&2; exit 1; }
[ -x "$UV" ] || { echo "build.sh: $UV missing (make $UV)" >&2; exit 1; }
mkdir -p "$OUT/.work" "$OUT/.cache/uv"

# The locked runtime dependencies (no dev extras, not the project itself), with their hashes; and the
# same pins without hashes as constraints for images that take only some of them.
"$UV" export --quiet --frozen --no-dev --no-emit-project --format requirements-txt -o "$OUT/.work/requirements.txt"
"$UV" export --quiet --frozen --no-dev --no-emit-project --no-hashes --format requirements-txt \
  -o "$OUT/.work/constraints.txt"
# The project as a wheel (for images with APP=wheel: console scripts such as gpu-node-agent).
rm -rf "$OUT/.work/dist"
"$UV" build --quiet --wheel --out-dir "$OUT/.work/dist" >/dev/null
# The project's files an image with APP=source runs from (tracked files only: no var/, no .venv).
git ls-files -z -- portal scheduling billing nodeagent gpuctl templates static locale manage.py pyproject.toml \
  | tar --null -T - -cf "$OUT/.work/app.tar"

build_rootfs() {
  local name=$1 NAME PACKAGES PYTHON PRUNE PRUNE_FILES PRUNE_BIN PRUNE_ROOT BYTECODE_ONLY LOCALES DROP APP ENTRYPOINT STATE_DIR WORKDIR
  # shellcheck disable=SC1090
  . "$IMAGE_DIR/$name.image"
  local started=$SECONDS
  echo "== $name: root filesystem (mmdebstrap $SUITE: $PACKAGES)"
  export IMAGE_PYTHON=$PYTHON IMAGE_PRUNE=${PRUNE:-} IMAGE_PRUNE_FILES=${PRUNE_FILES:-} IMAGE_PRUNE_BIN=${PRUNE_BIN:-} IMAGE_PRUNE_ROOT=${PRUNE_ROOT:-} IMAGE_BYTECODE_ONLY=${BYTECODE_ONLY:-} IMAGE_LOCALES=${LOCALES:-} IMAGE_DROP=${DROP:-} IMAGE_APP=$APP IMAGE_ENTRYPOINT=$IMAGE_DIR/$ENTRYPOINT IMAGE_STATE_DIR=$STATE_DIR \
    IMAGE_WORK=$OUT/.work IMAGE_UV=$UV IMAGE_UV_CACHE=$OUT/.cache/uv
  # Documentation, man pages and message catalogues of the Debian packages are left out (copyrights kept).
  # merged-usr: /bin -> usr/bin set up by mmdebstrap's hook, so no usrmerge package (and no perl, 47 MB).
  mmdebstrap --mode=root --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include="$PACKAGES" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --customize-hook="$IMAGE_DIR/customize.sh \"\$1\"" \
    "$SUITE" "$OUT/$name.rootfs.tar" "$APT_SOURCES"
  echo "== $name: rootfs $(du -m "$OUT/$name.rootfs.tar" | cut -f1) MB uncompressed, $((SECONDS - started)) s"
}

build_image() {
  local name=$1 NAME PACKAGES PYTHON PRUNE PRUNE_FILES PRUNE_BIN PRUNE_ROOT BYTECODE_ONLY LOCALES DROP APP ENTRYPOINT STATE_DIR WORKDIR
  # shellcheck disable=SC1090
  . "$IMAGE_DIR/$name.image"
  local started=$SECONDS
  local storage=(--root "$OUT/.storage" --runroot "$OUT/.storage-run" --storage-driver vfs)
  echo "== $name: image $NAME:$VERSION (buildah bud, FROM scratch)"
  buildah "${storage[@]}" bud --quiet --isolation chroot --layers=false \
    -f "$IMAGE_DIR/Dockerfile" --build-arg "ROOTFS=$name.rootfs.tar" --build-arg "STATE_DIR=$STATE_DIR" \
    --build-arg "WORKDIR=${WORKDIR:-$STATE_DIR}" --build-arg "NAME=$NAME" --build-arg "VERSION=$VERSION" -t "localhost/$NAME:$VERSION" "$OUT" >/dev/null
  rm -f "$OUT/$name.oci.tar"
  buildah "${storage[@]}" push --quiet --compression-format gzip "localhost/$NAME:$VERSION" \
    "oci-archive:$OUT/$name.oci.tar:$NAME:$VERSION"
  buildah "${storage[@]}" rmi --all >/dev/null
  echo "== $name: $OUT/$name.oci.tar ($NAME:$VERSION) $(du -m "$OUT/$name.oci.tar" | cut -f1) MB, $((SECONDS - started)) s"
}

for name in "$@"; do
  [ -f "$IMAGE_DIR/$name.image" ] || { echo "build.sh: no $IMAGE_DIR/$name.image" >&2; exit 2; }
  build_rootfs "$name"
  [ "$rootfs_only" = 1 ] || build_image "$name"
done
