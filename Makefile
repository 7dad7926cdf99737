# The two commands a new user needs:  `make demo`  and  `make test`.
# Both set up everything from a fresh clone (system packages when root, a virtualenv,
# the native runner) before doing their job.

PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# python3-venv/python3-dev: Debian's python3 makes the virtualenv; systemd-python builds
# against libsystemd-dev; systemd provides systemd-analyze for the unit test. The same
# list serves CI on a fresh Debian 12 machine.
APT_DEPS := gcc make pkg-config libzstd-dev libsystemd-dev python3-venv python3-dev systemd
# A real Prometheus server and node_exporter for tests/test_prometheus_server.py (skipped,
# saying so, without them). Installed without recommends (smartmontools, ipmitool, ...).
TEST_APT_DEPS := prometheus prometheus-node-exporter
DEB_DEPS := debhelper dh-python pybuild-plugin-pyproject python3-all python3-setuptools \
            python3-wheel dpkg-dev fakeroot lintian systemd
# The CPU build of PyTorch: from a local wheel or index if pip already sees one, else
# from PyTorch's CPU index (PyPI's default Linux wheel is the CUDA build, gigabytes more).
TORCH_CPU ?= torch==2.13.0+cpu
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
DEMO_ARGS ?=
# The benches `make bench` runs: those that need no input and finish in minutes (bench/README.md lists all).
BENCHES ?= schedule_compile generate import_scale sim_state_effect

.PHONY: setup build test demo bench deb deb-check deb-install-test deb-python-test man constraints clean

setup: $(STAMP) build

$(STAMP): pyproject.toml
	@missing=$$(for p in $(APT_DEPS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing system packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing system packages (install them as root): $$missing"; exit 1; fi; fi
	@missing=$$(for p in $(TEST_APT_DEPS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing test servers: $$missing"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } \
	      || echo "could not install $$missing: the Prometheus server test will be skipped"; \
	  else echo "not root: $$missing not installed; the Prometheus server test will be skipped"; fi; fi
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q '$(TORCH_CPU)' 2>/dev/null || \
	  $(BIN)/pip install -q --extra-index-url $(TORCH_CPU_INDEX) '$(TORCH_CPU)'
	$(BIN)/pip install -q -e '.[controller,systemd,dev]' -c constraints/controller.txt
	touch $(STAMP)

build: $(STAMP)
	$(MAKE) -C stressors

# The suite in two phases (issue 43). First the tests that do not measure the host, on
# TEST_WORKERS pytest-xdist processes, a test file to a process (its module fixtures built
# once), one OpenMP/BLAS thread each (the workers are the parallelism; threads spinning beside
# them only burn CPU). More workers than the 2 cores pay, as many tests wait on real time: on
# the 2-vCPU VM this phase took 245 s on 3 and 225 s on 4. Files with tests marked `slow` are
# handed out first (tests/conftest.py; --no-loadscope-reorder keeps that order), so that no
# long file starts last and runs alone at the end. Then the tests marked `serial`
# (they measure this host's CPU, disk, network or timing, so nothing may run beside them),
# alone. Both phases always run; the target fails if either does.
# The suite starts ~300 Python processes (agents, CLIs, trainers): where PYTHONDONTWRITEBYTECODE
# is set (as this project's CI host does) each would compile the project's modules again, ~0.4 s
# of CPU apiece. The suite writes their bytecode beside them, in the __pycache__ folders git
# ignores (a PYTHONPYCACHEPREFIX would be worse: it hides the virtualenv's compiled torch and
# numpy, and every fresh clone compiled them again).
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE
TEST_WORKERS ?= 4
test: setup
	@rc=0; \
	echo "== make test, phase 1: the tests that do not measure the host, $(TEST_WORKERS) workers"; \
	$(TEST_ENV) OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q --durations=15 -m "not serial" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests || rc=1; \
	echo "== make test, phase 2: the tests that measure the host (marked serial), alone"; \
	$(TEST_ENV) $(BIN)/python -m pytest -q --durations=15 -m serial tests || rc=1; \
	exit $$rc

demo: setup
	$(BIN)/mimesys demo $(DEMO_ARGS)

bench: setup
	@for b in $(BENCHES); do echo "== bench/$$b.py" >&2; $(BIN)/python bench/$$b.py || exit 1; done

# The agent's Debian package: debian-build/mimesys-agent_<version>_<arch>.deb
# (packaging/README.md says how it is built and why it vendors two wheels).
deb:
	@missing=$$(for p in $(DEB_DEPS) $(APT_DEPS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing package build dependencies: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing build dependencies (install them as root): $$missing"; exit 1; fi; fi
	packaging/build-deb.sh

deb-check: deb
	packaging/check-deb.sh

# The agent's tests on Debian 12's python3-* packages + the vendored wheels, in a throwaway
# root with the package installed (root, Debian mirror; CI runs it after deb-check).
deb-python-test: deb
	packaging/test-debian-python.sh

# apt install of the .deb into a throwaway Debian 12 root (debootstrap; needs root and a
# Debian mirror), then the agent started from it, then purge.
deb-install-test: deb
	packaging/test-install.sh

# The manual pages of both CLIs, generated from the commands (tests/test_manpages.py checks
# that the committed ones are current).
man:
	$(BIN)/python packaging/gen-man.py

# The controller's versions after a `make test` that passed on upgraded packages.
constraints:
	{ sed -n '1,3p' constraints/controller.txt; $(BIN)/pip freeze | grep -v '^-e\|^mimesys'; } > constraints/controller.txt.new
	mv constraints/controller.txt.new constraints/controller.txt

clean:
	$(MAKE) -C stressors clean
	rm -rf build dist *.egg-info debian-build
