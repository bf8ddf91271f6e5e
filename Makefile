# `make demo`: run virtxml-cpu on the bundled example XMLs (no libvirt needed).
# `make test`: set everything up and run the whole suite. As root on a KVM host this installs Debian's
# QEMU + libvirt, starts libvirtd and runs the real-QEMU tests; elsewhere those tests skip, loudly.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXAMPLES := $(wildcard examples/*.xml)

.PHONY: demo test lab bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	@echo "### virtxml-cpu explain examples/*.xml"
	@$(PY) -m virtxml_cpu explain $(EXAMPLES)
	@echo "### virtxml-cpu rewrite --diff examples/*.xml   (what would change; files untouched)"
	@$(PY) -m virtxml_cpu rewrite --diff $(EXAMPLES)
	@echo "### virtxml-cpu rewrite --check examples/*.xml"
	@$(PY) -m virtxml_cpu rewrite --check -q $(EXAMPLES); echo "exit status $$? (1 = some guests need the fix)"

# The real libvirtd + QEMU/KVM labs (root only): Debian 12's QEMU 7.2 + libvirt 9.0 on the host, and
# QEMU 10.0.2 + libvirt 11.3 from bookworm-backports in a chroot with its own daemons; libvirt-python in
# the venv.
lab: $(STAMP)
	bash tests/lab/up.sh
	bash tests/lab/up-bpo.sh
	$(PY) -c 'import libvirt' 2>/dev/null || $(PY) -m pip install -q 'libvirt-python>=9.0'

test: $(STAMP)
	@if [ "$$(id -u)" = 0 ] && [ -e /dev/kvm ]; then \
	  $(MAKE) --no-print-directory lab; \
	else \
	  echo "!!! not root or no /dev/kvm: the real libvirt/QEMU/KVM tests will be SKIPPED"; \
	fi
	$(PY) -m pytest -ra tests

bench: $(STAMP)
	$(PY) bench/hook_latency.py
	$(PY) bench/audit_scale.py
	$(PY) bench/file_cost.py
	$(PY) bench/fleet_faults.py

clean:
	rm -rf $(VENV) build demo-out .pytest_cache
