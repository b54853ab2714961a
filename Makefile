# Set-up is part of every target: a fresh clone needs only `make render` / `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The Flowers under test (requirements-flwr.txt): releases (`flwr==X`) and pre-releases (`flwr-nightly==X.devN`,
# Flower's nightly package), one venv each, `.venv-flwr-<version>`. FLWR_DEFAULT_VENV is the default version's
# (flower/versions.py DEFAULT_VERSION; tests/support/flower.py's HTTP_ERA), the one Flower bench and e2e-scale run.
FLWR_RELEASES := $(shell sed -n 's/^flwr==//p' requirements-flwr.txt)
FLWR_PRERELEASES := $(shell sed -n 's/^flwr-nightly==//p' requirements-flwr.txt)
FLWR_VENVS := $(foreach v,$(FLWR_RELEASES) $(FLWR_PRERELEASES),.venv-flwr-$(v)/.installed)
FLWR_DEFAULT_VENV := .venv-flwr-$(shell sed -n 's/^DEFAULT_VERSION = "\(.*\)"$$/\1/p' flower_federation/flower/versions.py)/.installed
STACK ?= dev

.PHONY: render validate lint test test-live test-rest test-rest-longest test-rest-others test-canary e2e e2e-scale e2e-tools venvs schema docs golden bench clean
.DEFAULT_GOAL := render

# Re-installs when a requirement file changes. The set-up talks on stderr only (make's echo of
# each step, the steps' own output): stdout is the target's, so `make render > out.yaml` and
# `make render | kubectl apply -f -` get only the YAML, on a fresh clone too.
SETUP = printf '%s\n' "$(1)" >&2 && $(1) >&2

# uv (requirements-uv.txt, in a venv of its own) installs `.venv`, the Flower venvs and checkov's: on a fresh clone
# pip took most of the set-up, one download at a time (CONTRIBUTING.md, CI time). --compile-bytecode writes the
# .pyc files pip would have, which the e2e's containers need (they run as another user and cannot write them:
# without them every Flower process would compile Flower anew). `.venv` keeps pip (tests/test_wheel_install.py
# and tests/support/state_guard.py use it, and Pulumi.yaml's `toolchain: pip`); the others are made without it.
# The canary's venvs stay pip's: they test what a user's `pip install flwr` gets. uv is an order-only
# prerequisite: a newer uv reinstalls nothing. Two makes at once (`make render & make venvs`) would both make
# .venv-uv: make it first, as .ci/run does.
UV_VENV := .venv-uv
UV := $(UV_VENV)/bin/uv
UV_INSTALL = UV_PYTHON_DOWNLOADS=never $(UV) pip install --quiet --compile-bytecode

$(UV_VENV)/.installed: requirements-uv.txt
	@$(call SETUP,$(PYTHON) -m venv $(UV_VENV))
	@$(call SETUP,$(UV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-uv.txt)
	@touch $@

$(VENV)/.installed: requirements.txt requirements-dev.txt | $(UV_VENV)/.installed
	@$(call SETUP,$(PYTHON) -m venv $(VENV))
	@$(call SETUP,$(UV_INSTALL) --python $(PY) -r requirements-dev.txt)
	@# The venv's Python finds this checkout from any directory (`.venv/bin/python -m flower_federation` outside
	@# it): a .pth file naming it, which needs no build (an editable install would fetch setuptools 77+).
	@$(PY) -c 'import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "flower_federation_checkout.pth").write_text(sys.argv[1] + "\n")' "$(CURDIR)"
	@touch $@

.venv-flwr-%/.installed: requirements-flwr.txt | $(UV_VENV)/.installed
	@$(call SETUP,$(PYTHON) -m venv --without-pip .venv-flwr-$*)
	@$(call SETUP,$(UV_INSTALL) --python .venv-flwr-$*/bin/python \
		$(if $(filter $*,$(FLWR_PRERELEASES)),flwr-nightly,flwr)==$*)
	@touch $@

.venv-checkov/.installed: requirements-checkov.txt | $(UV_VENV)/.installed
	@$(call SETUP,$(PYTHON) -m venv --without-pip .venv-checkov)
	@$(call SETUP,$(UV_INSTALL) --python .venv-checkov/bin/python -r requirements-checkov.txt)
	@touch $@

# The venvs the tests need besides `.venv`: .ci/run installs them while `make render` installs `.venv`.
venvs: $(FLWR_VENVS) .venv-checkov/.installed

render: $(VENV)/.installed
	@$(PY) -m flower_federation render --stack $(STACK)

validate: $(VENV)/.installed
	@$(PY) -m flower_federation validate --stack $(STACK)

# Generated files: tests fail when a committed copy is stale and name the target that refreshes it.
schema: $(VENV)/.installed
	@$(PY) -m flower_federation schema --write

docs: $(VENV)/.installed
	@$(PY) -m flower_federation docs --write

# Rewrites tests/golden/*.rendered.yaml, *.outputs.json and *.urns.txt (tests/support/golden.py) from the
# current code: review the diff before committing it.
golden: $(VENV)/.installed
	@$(PY) -m tests.support.golden

# pytest exits 5 when it collected no test: that is a failure here, and says so.
# ruff (format check + lint) over the project, mypy --strict over flower_federation/
# (settings in pyproject.toml). `make test` runs it first.
LINTED := flower_federation tests bench policy __main__.py
# The GitHub workflows (docs/pull-requests.md): zizmor offline (no token, no network: the same answer on
# every machine) at its strictest persona, with the justified ignores of .github/zizmor.yml; then
# check-jsonschema against the GitHub workflow schema it vendors.
WORKFLOWS := $(wildcard .github/workflows/*.yml)
ZIZMOR := $(VENV)/bin/zizmor --offline --persona auditor --config .github/zizmor.yml --no-progress --quiet
# At nice 10: under `make -j test` mypy's ~40 CPU-seconds would otherwise compete with the e2e's first
# federation start (a burst that must beat the SuperLink's liveness probe).
lint: $(VENV)/.installed
	@nice -n 10 $(VENV)/bin/ruff format --check --quiet $(LINTED) && nice -n 10 $(VENV)/bin/ruff check --quiet $(LINTED) && nice -n 10 $(VENV)/bin/mypy
	@nice -n 10 $(ZIZMOR) .github && nice -n 10 $(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)
	@echo "lint: ruff, mypy --strict, zizmor and the workflow schema clean"

# The e2e harness needs two Debian packages: `nftables` (`nft`: it enforces NetworkPolicies) and
# `nginx` (it runs nginx images, the Fleet-only proxy's, and its Gateway API emulation with it;
# bookworm's `nginx` has the http ssl and proxy modules built in). As root (CI), the missing ones
# are installed in one apt run, with no service started (a policy-rc.d that says no, for the
# install only, where the host has none); the e2e tests fail, saying why, if one still is.
# Not root: the e2e tests skip anyway (they need root), so nothing is installed. `test-rest` needs it
# too (tests/test_e2e_gateway_config.py runs `nginx -t`); under -j it installs beside the venvs.
E2E_TOOLS := nft=nftables nginx=nginx promtool=prometheus
e2e-tools:
	@missing=""; \
	for pair in $(E2E_TOOLS); do \
	  tool=$${pair%%=*}; \
	  if ! command -v $$tool >/dev/null 2>&1 && [ ! -x /usr/sbin/$$tool ]; then missing="$$missing $${pair#*=}"; fi; \
	done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then \
	  echo "installing$$missing (apt-get) for the e2e harness and the metrics tests (NetworkPolicies, nginx images, Gateway emulation, promtool)"; \
	  guard=""; \
	  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && guard=1; fi; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y -qq $$missing) >/dev/null \
	    || echo "could not install$$missing: the e2e tests will fail" >&2; \
	  if [ -n "$$guard" ]; then rm -f /usr/sbin/policy-rc.d; fi; \
	fi

# The tests in three parts, side by side under `make -j` (.ci/run passes -j8): `e2e` (below) and
# `test-live` run real Flower against wall-clock deadlines (tests/e2e; the other tests marked `live`),
# `test-rest` everything else at nice 19, so it takes only the CPU the live parts leave (a core a normal
# process wants leaves a nice-19 one about 1.5%): the e2e mostly waits on Flower's timers, and the rest
# fills those waits. The other live tests once ran after the e2e, in its pytest session, because a port
# they picked was taken beside it; their ports now come from outside the ephemeral range
# (tests/support/processes.py free_port), so they run beside it and leave the critical path.
# Without -j they run one after the other.
test: lint e2e test-live test-rest

test-live: $(VENV)/.installed $(FLWR_VENVS) e2e-tools
	@$(PY) -m pytest -m live --ignore=tests/e2e; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run" >&2; fi; exit $$rc

# `test-rest` is two pytest processes, side by side under -j: the e2e and the live tests leave it little CPU
# until they end, and then one process used one core of two (CI of 444650c: the rest ran alone, single-threaded,
# for its last 4 minutes). REST_LONGEST, its three longest files (about half its CPU: the config fuzzer, the
# injection invariant, the wheel install), run in one, every other file in the other.
REST_LONGEST := tests/test_config_fuzzing.py tests/test_injection_invariant.py tests/test_wheel_install.py
test-rest: test-rest-longest test-rest-others

test-rest-longest: $(VENV)/.installed $(FLWR_VENVS) .venv-checkov/.installed e2e-tools
	@nice -n 19 $(PY) -m pytest -m "not live" $(REST_LONGEST); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run" >&2; fi; exit $$rc

test-rest-others: $(VENV)/.installed $(FLWR_VENVS) .venv-checkov/.installed e2e-tools
	@nice -n 19 $(PY) -m pytest -m "not live" $(addprefix --ignore=,$(REST_LONGEST)); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run" >&2; fi; exit $$rc

# End-to-end: rendered pods as real processes with real Flower, one network namespace
# per pod (tests/e2e). Needs root and `ip netns`; skips with the reason otherwise.
e2e: $(VENV)/.installed $(FLWR_VENVS) e2e-tools
	@$(PY) -m pytest tests/e2e -v; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run" >&2; fi; exit $$rc

# Many SuperNodes alone (tests/e2e/scale.py, scenario 19): E2E_SCALE SuperNodes across sites of ten, 30
# unless set; its figures are the scenario's phases (docs/benchmarks.md, "Many SuperNodes"). Needs root.
E2E_SCALE ?= 30
e2e-scale: $(VENV)/.installed $(FLWR_DEFAULT_VENV) e2e-tools
	@E2E_SCALE=$(E2E_SCALE) $(PY) -m pytest tests/e2e/test_e2e_scale.py tests/e2e/test_e2e.py::test_9_nothing_left_behind -v

# The canary (.github/workflows/canary.yml, weekly; not part of `make test`): the newest `flwr` and `flwr-nightly` the
# registry serves, each installed anew into a venv of its own, compared with the tested versions (tests/support/canary.py:
# flags, Fleet/Control/health routes, state migrations; it names the first change nobody has accounted for), then the
# parser tests and the e2e scenarios of the newest Flower (tests/support/flower.py's NEXT) run against them. Every step
# runs; the target fails if one did. Needs root for the e2e (as `make e2e`). The nightly's requirement names a
# pre-release (>=0.dev0), so pip takes pre-releases of it alone (`--pre` would take its dependencies' too: a
# grpcio-health-checking release candidate built for a newer protobuf than the one pip kept broke the import).
CANARY_VENVS := .venv-canary-flwr .venv-canary-flwr-nightly
CANARY_ENV = FLOWER_CANARY_VENVS="$(foreach v,$(CANARY_VENVS),$(CURDIR)/$(v))"
test-canary: $(VENV)/.installed $(FLWR_VENVS) e2e-tools
	@rm -rf $(CANARY_VENVS)
	@$(call SETUP,$(PYTHON) -m venv .venv-canary-flwr)
	@$(call SETUP,.venv-canary-flwr/bin/python -m pip install --quiet --disable-pip-version-check flwr)
	@$(call SETUP,$(PYTHON) -m venv .venv-canary-flwr-nightly)
	@$(call SETUP,.venv-canary-flwr-nightly/bin/python -m pip install --quiet --disable-pip-version-check 'flwr-nightly>=0.dev0')
	@rc=0; \
	$(PY) -m tests.support.canary $(CANARY_VENVS) > .venv-canary-flwr/canary.txt; verdict=$$?; cat .venv-canary-flwr/canary.txt; \
	$(CANARY_ENV) $(PY) -m pytest tests/test_flower_cli.py || rc=1; \
	next="$$($(CANARY_ENV) $(PY) -c 'from tests.support.flower import NEXT; print(NEXT)')"; \
	$(CANARY_ENV) $(PY) -m pytest tests/e2e/test_e2e.py -k "$$next or test_9_nothing_left_behind" -v || rc=1; \
	if [ $$verdict -ne 0 ]; then tail -n 1 .venv-canary-flwr/canary.txt >&2; rc=1; fi; \
	exit $$rc

# Offline render time against the Pulumi SDK's floor, node registration against a live SuperLink, and a model
# through the Fleet-only proxy (Debian's nginx, as `make test` installs it) against direct (bench/run.py); not
# part of `make test`. BENCH_ARGS, e.g. --repeat 9 or --rows dev,pools-16,register-10000,proxy-100mb.
# The registration and proxy rows run the default Flower (tests/support/flower.py's HTTP_ERA), so only its venv is made here.
bench: $(VENV)/.installed $(FLWR_DEFAULT_VENV) e2e-tools
	@$(PY) bench/run.py $(BENCH_ARGS)

# The venvs and the tools' caches (pytest, hypothesis, mypy, ruff).
clean:
	rm -rf $(VENV) .venv-flwr-* .venv-canary-* .venv-checkov $(UV_VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache .cache
