# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv and install first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.installed-stamp-bench
export RAY_AUTH_MODE ?= disabled
# Python may write its bytecode caches (__pycache__/, ignored by git): with PYTHONDONTWRITEBYTECODE
# set, as on some CI images, every process of a crawl compiled the checkout's modules again.
unexport PYTHONDONTWRITEBYTECODE

PYWB_VENV := .venv-pywb
PYWB_STAMP := $(PYWB_VENV)/.installed-stamp-wacz

.PHONY: setup system-packages pywb mitm spark demo test test-fast lint docs bench clean

# uv (from PyPI, into the venv) installs what pip would, the same versions, in a third of the time:
# 10.7 against 30.6 s, 13 against 28 CPU-s, from empty caches (measured); pip does it if uv cannot.
# Neither byte-compiles (pip would compile every module of every package, Ray's thousands: 52 s of
# install against 22 s, measured); Python compiles and caches the ones a run imports.
# $(call PIP_INSTALL,WHAT,VENV)
PIP_INSTALL = $(2)/bin/python -m pip install -q uv && $(2)/bin/uv pip install -q --python $(2)/bin/python $(1) \
	|| { $(2)/bin/python -m pip install -q --upgrade pip && $(2)/bin/python -m pip install -q --no-compile $(1); }
# A variable: a comma inside $(call …) would split its arguments.
DEV_BENCH := .[dev,bench]

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(call PIP_INSTALL,-e '.[dev]',$(VENV))
	touch $(STAMP)

# The benchmarks' peers (Scrapy, tantivy, networkit…) only for `make bench`: no test needs them
# (back to back, make test's install took 36 s without them against 38 s with them, with pip).
$(BENCH_STAMP): $(STAMP)
	$(call PIP_INSTALL,-e '$(DEV_BENCH)',$(VENV))
	touch $(BENCH_STAMP)

# Debian packages tests drive, installed only when missing (sudo only when not root): chromium,
# the headless browser of tests/test_search_browser.py, fuse3 (libfuse3), the FUSE library of
# tests/crash_fs.py, the filesystem that crashes as a machine does, and a JVM for Spark
# (tests/test_cc_pyspark.py). One apt-get for all.
system-packages:
	@need=; command -v chromium >/dev/null 2>&1 || need="$$need chromium"; \
	  { command -v fusermount3 >/dev/null 2>&1 && ldconfig -p | grep -q libfuse3.so.3; } || need="$$need fuse3"; \
	  command -v java >/dev/null 2>&1 || need="$$need default-jre-headless"; \
	  [ -z "$$need" ] || { \
	  SUDO=; if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi; \
	  echo "installing Debian's$$need (for the tests)"; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need >/dev/null; }

setup: $(STAMP) system-packages

# pywb (the replay tool tests/pywb_replay.py drives) and webrecorder's WACZ validator, in a venv of
# their own: pywb pins redis==2.10.6, which the crawler's redis-py cannot share a venv with.
$(PYWB_STAMP):
	python3 -m venv --clear $(PYWB_VENV)
	$(call PIP_INSTALL,'pywb==2.10.0' 'wacz==0.6.0',$(PYWB_VENV))
	touch $(PYWB_STAMP)

pywb: $(PYWB_STAMP)

# mitmproxy, the HTTP proxy of tests/test_proxies.py, in a venv of its own too: its pins (msgpack,
# pyparsing, h2…) are not Ray's and matplotlib's. 11.0 is its last release for Python 3.11.
MITM_VENV := .venv-mitm
MITM_STAMP := $(MITM_VENV)/.installed-stamp

$(MITM_STAMP):
	python3 -m venv --clear $(MITM_VENV)
	$(call PIP_INSTALL,'mitmproxy==11.0.2',$(MITM_VENV))
	touch $(MITM_STAMP)

mitm: $(MITM_STAMP)

# pyspark (and what cc-pyspark's jobs import) for tests/test_cc_pyspark.py, which runs Common Crawl's
# own Spark jobs over a crawl's WET and WAT files; a venv of its own, made beside the others. PyPI
# has pyspark as a source archive only, and its wheel is 480 MB of jars, compressed archives
# already: built stored, not deflated again (23 s and 26 CPU-s against 11 s and 14, measured). Neither
# installer's cache keeps it well here: uv's revalidation found the archive "modified" each time, so
# it built the wheel again anyway and kept each build, 2.4 GB more cache an install (63 GB had filled
# this machine's disk until Ray refused the tests' tasks with OutOfDiskError). So the wheel is built
# once a machine, into SPARK_WHEELS (atomically: clones set up side by side may both build it), and
# each venv installs it from there (pyspark's install 3 s and 4 CPU-s; the Spark venv, once the
# longest part of make test's set-up, 6–10 s instead of 10–16, measured). Spark needs a JVM (java,
# 17 or later: system-packages).
SPARK_VENV := .venv-spark
SPARK_STAMP := $(SPARK_VENV)/.installed-stamp
SPARK_WHEELS ?= $(HOME)/.cache/raycrawl/wheels
SPARK_WHEEL := $(SPARK_WHEELS)/pyspark-4.3.0-py2.py3-none-any.whl

SPARK_FROM_SOURCE := --config-settings=--build-option=--compression=stored pyspark==4.3.0

$(SPARK_WHEEL):
	mkdir -p $(SPARK_WHEELS)
	tmp=$$(mktemp -d $(SPARK_WHEELS)/.build.XXXXXX) && python3 -m venv $$tmp/venv \
	  && $$tmp/venv/bin/python -m pip wheel -q --no-deps --no-cache-dir $(SPARK_FROM_SOURCE) -w $$tmp \
	  && mv $$tmp/$(notdir $(SPARK_WHEEL)) $@; status=$$?; rm -rf $$tmp; exit $$status

# (No wheel kept — a cache that cannot be written, a pip that cannot build it — and the venv builds
# pyspark from its source as before.)
$(SPARK_STAMP):
	python3 -m venv --clear $(SPARK_VENV)
	-$(MAKE) --no-print-directory $(SPARK_WHEEL)
	if [ -f $(SPARK_WHEEL) ]; then pyspark=$(SPARK_WHEEL); else pyspark="$(SPARK_FROM_SOURCE)"; fi; \
	  $(call PIP_INSTALL,--no-cache-dir $$pyspark 'warcio>=1.7' 'boto3>=1.34' 'requests>=2.31' 'idna>=3.6',$(SPARK_VENV))
	touch $(SPARK_STAMP)

spark: $(SPARK_STAMP)

# The demo needs no browser: only the tests install chromium (and fuse3).
demo: $(STAMP)
	$(VENV)/bin/raycrawl demo --out demo-out

lint: setup
	$(VENV)/bin/ruff check .

# Four pytest workers, a test file each at a time (module fixtures are shared within a file): the
# crawls mostly wait on politeness delays, so four keep both cores ~95 % busy (measured: 553 s
# against 605 s with three). Files go out longest first (tests/conftest.py orders them by
# tests/file_seconds.json; xdist's own reordering, by number of tests, is off). The 25 slowest
# tests are listed.
PYTEST := $(VENV)/bin/pytest -q -p no:cacheprovider -n 4 --dist loadfile --no-loadscope-reorder

# The four venvs and (on a fresh machine) Debian's chromium, fuse3 and a JVM are installed side by side (-j4:
# pip and apt wait on the network and on unpacking as much as on a core).
test:
	@$(MAKE) --no-print-directory -j4 setup pywb mitm spark
	@$(MAKE) --no-print-directory lint
	$(PYTEST) --durations=25

# The edit loop: everything but the tests marked slow (whole crawls, clusters, faults).
test-fast: setup pywb
	$(PYTEST) -m "not slow"

# docs/settings.md and docs/sample-config.toml are generated from core/settings.py (tests/test_settings.py checks it is current).
docs: setup
	$(PY) -c "from raycrawl.settings import markdown; print(markdown(), end='')" > docs/settings.md
	$(PY) -c "from raycrawl.settings import sample_config; print(sample_config(), end='')" > docs/sample-config.toml
	$(PY) -m raycrawl.storage.operator_verbs docs/operating.md

bench: setup $(BENCH_STAMP)
	for b in benchmarks/[a-z]*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf demo-out .pytest_cache build *.egg-info $(PYWB_VENV) $(MITM_VENV) $(SPARK_VENV)
