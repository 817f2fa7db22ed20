#!/usr/bin/env bash
# mmdebstrap's customize hook (build.sh): runs as root on the build machine with the new root filesystem
# at $1 (its /proc, /dev and resolv.conf set up by mmdebstrap), reading the IMAGE_* variables.
set -euo pipefail
rootfs=$1
python=/opt/venv/bin/python

in_root() { chroot "$rootfs" /usr/bin/env -i PATH=/opt/venv/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/root "$@"; }

# uv from the build machine, its cache bind-mounted (a rebuild downloads nothing); gone at the end.
install -m 0755 "$IMAGE_UV" "$rootfs/tmp/uv"
mkdir -p "$rootfs/tmp/uv-cache" "$rootfs/tmp/work"
mount --bind "$IMAGE_UV_CACHE" "$rootfs/tmp/uv-cache"
mount --bind "$IMAGE_WORK" "$rootfs/tmp/work"
trap 'umount "$rootfs/tmp/uv-cache" "$rootfs/tmp/work" 2>/dev/null || true' EXIT
# The build machine's CA bundle for the downloads (it may trust a TLS-intercepting proxy the image must
# not): in /tmp, which is emptied below.
install -m 0644 "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" "$rootfs/tmp/build-ca.crt"
proxies=()
for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY UV_INDEX_URL UV_DEFAULT_INDEX; do
  if [ -n "${!name:-}" ]; then proxies+=("$name=${!name}"); fi
done
uv_pip() {
  in_root "${proxies[@]}" SSL_CERT_FILE=/tmp/build-ca.crt UV_CACHE_DIR=/tmp/uv-cache UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never \
    /tmp/uv pip install --quiet --python "$python" --only-binary :all: --compile-bytecode "$@"
}

if [ -n "$IMAGE_PYTHON" ]; then
  in_root /tmp/uv venv --quiet --python /usr/bin/python3.11 /opt/venv
  if [ "$IMAGE_PYTHON" = locked ]; then
    uv_pip --require-hashes -r /tmp/work/requirements.txt
  else
    # shellcheck disable=SC2086
    uv_pip -c /tmp/work/constraints.txt $IMAGE_PYTHON
  fi
fi

# What the image never runs (PRUNE: `find -path` patterns under site-packages, e.g. test suites).
if [ -n "${IMAGE_PRUNE:-}" ]; then
  site=$(echo "$rootfs"/opt/venv/lib/python3.*/site-packages)
  prune=()
  read -r -a patterns <<<"$IMAGE_PRUNE"  # no globbing here: find matches them
  for pattern in "${patterns[@]}"; do prune+=(${prune:+-o} -path "./$pattern"); done
  (cd "$site" && find . -depth -type d \( "${prune[@]}" \) -exec rm -rf {} +)
fi

# Files nothing reads at run time (PRUNE_FILES: `find -name` patterns under site-packages, e.g. message
# sources and C sources shipped in wheels), and programs of the environment's bin/ (PRUNE_BIN).
if [ -n "${IMAGE_PRUNE_FILES:-}" ]; then
  site=$(echo "$rootfs"/opt/venv/lib/python3.*/site-packages)
  names=()
  read -r -a patterns <<<"$IMAGE_PRUNE_FILES"
  for pattern in "${patterns[@]}"; do names+=(${names:+-o} -name "$pattern"); done
  find "$site" -type f \( "${names[@]}" \) -delete
fi
for program in ${IMAGE_PRUNE_BIN:-}; do rm -f "$rootfs/opt/venv/bin/$program"; done
for path in ${IMAGE_PRUNE_ROOT:-}; do rm -rf "$rootfs"/$path; done  # globbed in the root filesystem
# Packages shipped as bytecode alone (BYTECODE_ONLY): each module's .pyc where its .py was, which Python
# imports without the source; tracebacks in them show files and lines without the lines' text.
for package in ${IMAGE_BYTECODE_ONLY:-}; do
  site=$(echo "$rootfs"/opt/venv/lib/python3.*/site-packages)
  in_root "$python" -m compileall -q -b -j 0 "${site#"$rootfs"}/$package"
  find "$site/$package" -type d -name __pycache__ -prune -exec rm -rf {} +
  find "$site/$package" -type f -name '*.py' -delete
done
# Message catalogues and locale formats of the languages the image serves (LOCALES); every package's
# locale/<language> of another language goes.
if [ -n "${IMAGE_LOCALES:-}" ]; then
  site=$(echo "$rootfs"/opt/venv/lib/python3.*/site-packages)
  keep=()
  for locale in $IMAGE_LOCALES; do keep+=(! -name "$locale"); done
  find "$site" -type d -path '*/locale/*' -prune "${keep[@]}" ! -name __pycache__ -exec rm -rf {} +
fi

# Packages the image does not need once the others are installed (DROP), removed without their dependants.
if [ -n "${IMAGE_DROP:-}" ]; then
  # shellcheck disable=SC2086
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg --purge --force-depends $IMAGE_DROP >/dev/null
fi

case "$IMAGE_APP" in
  source)
    mkdir -p "$rootfs/app"
    tar -xf "$IMAGE_WORK/app.tar" -C "$rootfs/app"
    in_root "$python" -m compileall -q /app
    # Static files and the zh_Hans catalogue are part of the image: nothing is written at start.
    in_root DEBUG=0 SECRET_KEY=image-build-only VAR_DIR=/tmp/build-var STATIC_ROOT=/app/staticfiles \
      REDIS_URL=redis://127.0.0.1:1/0 DJANGO_SETTINGS_MODULE=portal.settings \
      sh -c 'cd /app && python manage.py collectstatic --noinput -v0'
    test -f "$rootfs/app/locale/zh_Hans/LC_MESSAGES/django.mo"
    # Collected: the packages' static folders (those with no Python in them) and the project's are served
    # from /app/staticfiles alone. static/ itself stays, empty (STATICFILES_DIRS names it).
    site=$(echo "$rootfs"/opt/venv/lib/python3.*/site-packages)
    find "$site" -type d -name static -prune ! -exec sh -c 'find "$1" -name "*.py" | grep -q .' sh {} \; \
      -exec rm -rf {} +
    find "$rootfs/app/static" -mindepth 1 -delete
    rm -rf "$rootfs/tmp/build-var" ;;
  wheel)
    wheel=$(cd "$IMAGE_WORK/dist" && echo *.whl)  # the glob is the build machine's, the path the root's
    uv_pip --no-deps "/tmp/work/dist/$wheel" ;;
  "") ;;
  *) echo "customize.sh: unknown APP=$IMAGE_APP" >&2; exit 2 ;;
esac

install -m 0755 "$IMAGE_ENTRYPOINT" "$rootfs/usr/local/bin/entrypoint"

# The user the containers run as (no shell, no home of its own: HOME is the state directory).
echo "app:x:10001:10001:app:$IMAGE_STATE_DIR:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
echo "app:x:10001:" >>"$rootfs/etc/group"
echo "app:*:20000:0:99999:7:::" >>"$rootfs/etc/shadow"
install -d -m 0750 -o 10001 -g 10001 "$rootfs$IMAGE_STATE_DIR"

umount "$rootfs/tmp/uv-cache" "$rootfs/tmp/work"
trap - EXIT
rm -rf "$rootfs/tmp/"* "$rootfs/tmp/".[!.]* "$rootfs/var/cache/apt/"* "$rootfs/var/lib/apt/lists/"* \
  "$rootfs/var/log/"*.log "$rootfs/root/.cache"
# No compiler may remain (nothing above installs one; this says so if a package list ever does).
for cc in gcc cc c++ g++ clang; do
  if [ -e "$rootfs/usr/bin/$cc" ]; then echo "customize.sh: compiler /usr/bin/$cc in the image" >&2; exit 1; fi
done
