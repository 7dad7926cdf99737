# The two commands a new user needs:  `make demo`  and  `make test`.
# Both set up everything from a fresh clone (system packages when root, a virtualenv,
# the native runner) before doing their job.

PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
APT_DEPS := gcc make pkg-config libzstd-dev libsystemd-dev
DEB_DEPS := debhelper dh-python python3-all dpkg-dev fakeroot lintian systemd
TORCH_CPU ?= torch==2.13.0

.PHONY: setup build test demo bench deb clean

setup: $(STAMP) build

$(STAMP): pyproject.toml
	@missing=$$(for p in $(APT_DEPS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing system packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing system packages (install them as root): $$missing"; exit 1; fi; fi
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_CPU)
	$(BIN)/pip install -q -e '.[controller,systemd,dev]'
	touch $(STAMP)

build: $(STAMP)
	$(MAKE) -C stressors

test: setup
	$(BIN)/python -m pytest -q tests

demo: setup
	$(BIN)/mimesys demo

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

deb:
	@missing=$$(for p in $(DEB_DEPS) $(APT_DEPS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi
	packaging/build-deb.sh

clean:
	$(MAKE) -C stressors clean
	rm -rf build dist *.egg-info debian-build
