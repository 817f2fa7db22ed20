# Two commands do everything: `make run` and `make test` (`make e2e` for the browser tests).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# uv, pinned, installed from PyPI beside the project (not on PATH): it builds .venv from the committed uv.lock.
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
export UV_PROJECT_ENVIRONMENT := $(VENV)
EXTRAS ?= load

.PHONY: install extras prepare run test e2e lint docs demo clean messages compilemessages image image-rootfs idp run-idp

$(UV):
	$(PYTHON) -m pip install -q --disable-pip-version-check --target $(TOOLS) 'uv==$(UV_VERSION)'

# Bytecode compiled at install: where PYTHONDONTWRITEBYTECODE is set, every server and worker the suite starts
# would otherwise compile Django and the rest from source again (about 3 CPU-s each on a small machine).
$(STAMP): pyproject.toml uv.lock | $(UV)
	UV_COMPILE_BYTECODE=1 $(UV) sync --quiet --frozen --python $(PYTHON) --extra dev --extra docs
	touch $(STAMP)

install: $(STAMP)

# make run needs only the platform's own packages: the test, docs and bench extras are left for make test
# (--inexact keeps whatever else is installed), so a fresh clone downloads less before its first page.
RUN_STAMP := $(VENV)/.installed-run
$(RUN_STAMP): pyproject.toml uv.lock | $(UV)
	$(UV) sync --quiet --frozen --inexact --python $(PYTHON)
	touch $(RUN_STAMP)

# Optional extras on top of dev (bench.load: load; bench.placement_bound: bound): make extras EXTRAS="load bound".
# Compiled too: a sync without it leaves the whole environment without bytecode.
extras: install
	UV_COMPILE_BYTECODE=1 $(UV) sync --quiet --frozen --inexact --python $(PYTHON) --extra dev --extra docs $(foreach e,$(EXTRAS),--extra $(e))

# Waits for the database, migrates and collects the static files (portal.prepare: one process, collectstatic beside).
prepare: install
	$(PY) -m portal.prepare

# Everything, the 30 days of demo jobs included, before anything starts.
demo: install
	$(PY) -m portal.prepare --demo full

# The tenants, cluster and prices first; the demo month is played once the portal answers (portal.run).
run: $(RUN_STAMP)
	$(PY) -m portal.prepare --demo base
	$(PY) -m portal.run --demo-history

# CI narrows this (MARK="not e2e and not slow_server") in the stage that does not run the slow servers.
MARK ?= not e2e
# The suite across the cores (pytest-xdist): one worker per core, each with its own test database, Redis
# socket or Redis database number and runtime folders (tests/settings_env.py, tests/conftest.py).
# loadscope keeps a module (or class) on one worker, so its module fixtures (the demo month) are built once;
# the modules go out in the order tests/conftest.py sorts them (slow ones first), not by their number of tests.
# TEST_WORKERS=1 (or 0) runs the suite in this one process, as `pytest` without -n does.
TEST_WORKERS ?= auto
TEST_DIST ?= loadscope
XDIST = $(if $(filter 0 1,$(TEST_WORKERS)),-n 0,-n $(TEST_WORKERS) --dist $(TEST_DIST) --no-loadscope-reorder)
# The project's own bytecode too (kept in __pycache__, which git ignores), for the same processes.
APP_PACKAGES = portal billing scheduling nodeagent gpuctl
test: install
	$(PY) -m compileall -q -j 0 $(APP_PACKAGES) >/dev/null
	$(PY) -m pytest -m "$(MARK)" $(XDIST)

# One process: the browser tests share one Chromium and one live server.
e2e: install
	$(PY) -m pytest -m e2e tests/e2e -n 0

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# The manual: docs/ as an MkDocs site (mkdocs.yml), built into site/; --strict fails on a broken link,
# a missing anchor or a page left out of the nav.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# A demo OpenID Connect provider on http://127.0.0.1:9400 (tests/identity: oidc-provider on Node; any password):
# alice, dana, ops and eve, whose groups map to the demo workspaces. `make run-idp` (in another terminal) is
# `make run` with the provider's sign-in button and those mappings (docs/operator/sign-in-oidc.md).
idp:
	cd tests/identity && { [ -d node_modules/oidc-provider ] || npm ci --no-audit --no-fund; } && node idp.mjs demo-idp.json

run-idp: export OIDC_PROVIDERS := [{"id": "demo", "name": "Demo IdP", "issuer": "http://127.0.0.1:9400", "client_id": "portal-demo", "secret": "portal-demo-secret", "scopes": ["openid", "profile", "email", "groups"]}]
run-idp: export IDENTITY_GROUP_ROLES := {"ml-vision-owners": [{"workspace": "vision-lab", "role": "owner"}], "ml-nlp-members": [{"workspace": "nlp-group", "role": "member"}], "ml-nlp-owners": [{"workspace": "nlp-group", "role": "owner"}], "platform-admins": [{"staff": true}]}
run-idp: run

# The zh_Hans catalogue: `make messages` collects marked strings into locale/, translate the new
# entries in the .po, then `make compilemessages` (the .mo is committed, so a fresh clone has it).
messages: install
	$(PY) manage.py makemessages -l zh_Hans --no-obsolete --ignore '.venv/*' --ignore 'var/*' --ignore 'tests/*' --ignore 'gpuctl/*' --ignore 'nodeagent/*' --ignore 'bench/*' --ignore 'site/*' --ignore '.tools/*' --ignore 'build/*'

compilemessages: install
	$(PY) manage.py compilemessages -l zh_Hans --ignore '.venv/*' --ignore 'var/*' --ignore '.tools/*'

# OCI images (as root; mmdebstrap, buildah): build/images/portal.oci.tar (gpu-platform) and agent.oci.tar
# (gpu-node-agent), from Debian packages and uv.lock; deploy/image/build.sh says how.
image: $(UV)
	deploy/image/build.sh portal agent

# Only the root filesystem tarballs, for `docker build` with deploy/image/Dockerfile.
image-rootfs: $(UV)
	deploy/image/build.sh --rootfs-only portal agent

clean:
	rm -rf var staticfiles site $(TOOLS)
