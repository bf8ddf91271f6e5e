# `make demo`: run virtxml-cpu on the bundled example XMLs (no libvirt needed).
# `make test`: set everything up and run the whole suite. As root on a KVM host this installs Debian's
# QEMU + libvirt, starts libvirtd, builds the Debian package and the RPM and runs the real-QEMU tests; elsewhere
# those tests skip, loudly.
# `make bench`: the benchmarks in bench/ (as root on a KVM host also the lab's guest-start cost of the hook).
# `make cockpit`: bundle the Cockpit page (cockpit/src, PatternFly React) into cockpit/dist with esbuild,
# from the packages cockpit/package-lock.json pins (npm ci: the one step that needs the npm registry or its
# cache). `make pot`: po/virtxml-cpu.pot from the page's sources; `make po-update`: merge it into po/*.po.
# `make deb`: build virtxml-cpu_VERSION_all.deb and cockpit-virtxml-cpu_VERSION_all.deb (the Cockpit page)
# here with Debian's tools (debhelper, dh-python), in a copy of the tree under /tmp, and check them with
# lintian; as root, installs what is missing for that.
# `make rpm`: build virtxml-cpu-VERSION-1.noarch.rpm and its source RPM the same way with rpmbuild (Debian's
# rpm package) from a tarball of the tree, in a temporary topdir, and check them with rpmlint (into RPM_OUT,
# default here).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXAMPLES := $(wildcard examples/*.xml)

DEB_VERSION := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
DEB := virtxml-cpu_$(DEB_VERSION)_all.deb
COCKPIT_DEB := cockpit-virtxml-cpu_$(DEB_VERSION)_all.deb
DEB_BUILD_DEPS := build-essential dpkg-dev debhelper dh-python pybuild-plugin-pyproject python3-all python3-setuptools \
	python3-lxml python3-argparse-manpage lintian

RPM_VERSION := $(shell sed -n 's/^Version:[[:space:]]*//p' rpm/virtxml-cpu.spec)
RPM_RELEASE := $(shell sed -n 's/^Release:[[:space:]]*\([0-9]*\).*/\1/p' rpm/virtxml-cpu.spec)
RPM := virtxml-cpu-$(RPM_VERSION)-$(RPM_RELEASE).noarch.rpm
SRPM := virtxml-cpu-$(RPM_VERSION)-$(RPM_RELEASE).src.rpm
RPM_OUT ?= .
RPM_BUILD_DEPS := rpm rpmlint python3-pip python3-setuptools python3-wheel python3-lxml python3-argparse-manpage

.PHONY: demo test trusted-checkout lab deb rpm bench clean cockpit pot po-update

# $(call need_debs,PACKAGES,TARGET): install those of Debian's packages that are missing (root only).
define need_debs
@missing=$$(for p in $(1); do \
  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
if [ -n "$$missing" ]; then \
  if [ "$$(id -u)" != 0 ]; then echo "make $(2) needs: apt-get install" $$missing; exit 1; fi; \
  echo "installing build dependencies:" $$missing; \
  bash -c '. tests/lab/need-pkgs.sh && need_pkgs "$$@"' need-pkgs $$missing; \
fi
endef

# $(call copy_tree,DIR): the source (tracked and new files, not ignored ones) copied into DIR, so the build
# never changes the tree as git has it.
define copy_tree
if git rev-parse --git-dir >/dev/null 2>&1; then git ls-files -z -co --exclude-standard; \
else find . \( -name .git -o -path ./.venv -o -path ./build \) -prune -o -type f -print0; fi | \
  xargs -0 -r sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' sh | \
  tar --null -T - -cf - | tar -xf - -C $(1)
endef

# The Cockpit page. npm ci installs exactly the lock file's packages into cockpit/node_modules (npm's own
# cache in ~/.npm is the only thing outside the checkout); install scripts are not run: esbuild's binary
# comes in its platform package.
NPM_STAMP := cockpit/node_modules/.package-lock.json
COCKPIT_SRC := $(wildcard cockpit/src/*) cockpit/index.html cockpit/manifest.json cockpit/build.mjs \
	cockpit/po2js.mjs $(wildcard po/*.po)

$(NPM_STAMP): cockpit/package.json cockpit/package-lock.json
	cd cockpit && npm ci --no-audit --no-fund --ignore-scripts --prefer-offline --loglevel=error
	@touch $@

cockpit/dist/index.js: $(NPM_STAMP) $(COCKPIT_SRC)
	cd cockpit && node build.mjs

cockpit: cockpit/dist/index.js

# Every string of the page: `_("...")`, cockpit.gettext and cockpit.ngettext in cockpit/src (read as C, as
# cockpit-project/starter-kit does: xgettext's JavaScript reader stumbles on JSX), the <title translate>
# of index.html and the manifest's menu label (which the shell shows).
pot: po/virtxml-cpu.pot
po/virtxml-cpu.pot: $(wildcard cockpit/src/*) cockpit/index.html cockpit/manifest.json
	@mkdir -p build
	sed -n 's|.*<title translate="yes">\(.*\)</title>.*|_("\1");|p' cockpit/index.html > build/cockpit-html.c
	$(PYTHON) -c 'import json, sys; m = json.load(open("cockpit/manifest.json")); \
	  print("".join("_(%s);\n" % json.dumps(v["label"]) for v in m["menu"].values()))' > build/cockpit-manifest.c
	xgettext --language=C --keyword= --keyword=_ --keyword=gettext --keyword=ngettext:1,2 --from-code=UTF-8 \
	  --add-comments=TRANSLATORS --package-name=virtxml-cpu --no-location \
	  --sort-output -o $@ $(sort $(wildcard cockpit/src/*.js cockpit/src/*.jsx)) build/cockpit-html.c build/cockpit-manifest.c
	@sed -i '/^"POT-Creation-Date:/d' $@

po-update: po/virtxml-cpu.pot
	for po in po/*.po; do msgmerge --quiet --update --backup=none --no-location --sort-output $$po $<; done

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

# The real libvirtd + QEMU/KVM labs (root only), set up side by side (tests/lab/side-by-side.sh; each part's
# output in build/setup/): Debian 12's QEMU 7.2 + libvirt 9.0 on the host, and three Debian chroots with
# their own daemons (tests/lab/up-chroot.sh): QEMU 10.0.2 + libvirt 11.3 from bookworm-backports, Debian 11
# (QEMU 5.2, libvirt 7.0, Python 3.9) and forky (QEMU 11.1, libvirt 12.8); libvirt-python and
# pytest-xdist in the venv; zsh, mksh and busybox, the shells besides dash and bash that
# tests/unit/render/test_commands.py reads suggested commands in. For the Cockpit page's test: cockpit-ws, cockpit-bridge, chromium and its
# driver, and selenium in the venv.
LAB_PARTS := lab-host lab-bookworm-bpo lab-bullseye lab-forky lab-cockpit
LAB_CHROOTS := lab-bookworm-bpo lab-bullseye lab-forky
.PHONY: $(LAB_PARTS)

lab: $(STAMP)
	@MAKE="$(MAKE)" bash tests/lab/side-by-side.sh $(LAB_PARTS)

lab-host: $(STAMP)
	bash tests/lab/up.sh
	bash -c '. tests/lab/need-pkgs.sh && need_pkgs systemd zsh mksh busybox'
	$(PY) -c 'import libvirt, xdist, selenium' 2>/dev/null || \
	  $(PY) -m pip install -q 'libvirt-python>=9.0' 'pytest-xdist>=3.0' 'selenium>=4.10'

$(LAB_CHROOTS):
	bash tests/lab/up-chroot.sh $(@:lab-%=%)

lab-cockpit:
	bash tests/lab/up-cockpit.sh

# First: the checkout must lie where only the user and root can write (tools/trusted-checkout.sh says why).
trusted-checkout:
	@sh tools/trusted-checkout.sh .

# As root with /dev/kvm: the labs and the package are set up side by side, then pytest runs each lab's tests
# on a worker of its own (pytest-xdist, --dist=loadscope; work_unit in tests/conftest.py groups them).
test: trusted-checkout $(STAMP) cockpit
	@if [ "$$(id -u)" = 0 ] && [ -e /dev/kvm ]; then \
	  MAKE="$(MAKE)" bash tests/lab/side-by-side.sh $(LAB_PARTS) deb rpm; \
	else \
	  echo "!!! not root or no /dev/kvm: the real libvirt/QEMU/KVM tests will be SKIPPED"; \
	fi
	VIRTXML_CPU_DEB=$$([ -f $(DEB) ] && echo $(CURDIR)/$(DEB)) VIRTXML_CPU_RPM=$$([ -f $(RPM) ] && echo $(CURDIR)/$(RPM)) \
	  $(PY) -m pytest -ra --durations=15 \
	  $$([ "$$(id -u)" = 0 ] && [ -e /dev/kvm ] && echo --numprocesses=5 --dist=loadscope) tests

# The source is copied (tracked and new files, not ignored ones) so the tree stays as git has it; the
# build runs with a plain PATH so Debian's python3 builds it, whatever python3 the caller has first.
deb: cockpit
	$(call need_debs,$(DEB_BUILD_DEPS),deb)
	@tmp=$$(mktemp -d /tmp/virtxml-cpu-deb.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	mkdir "$$tmp/virtxml-cpu-$(DEB_VERSION)" && \
	$(call copy_tree,"$$tmp/virtxml-cpu-$(DEB_VERSION)") && \
	cp -r cockpit/dist "$$tmp/virtxml-cpu-$(DEB_VERSION)/cockpit/dist" && \
	(cd "$$tmp/virtxml-cpu-$(DEB_VERSION)" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$$tmp" \
	  LC_ALL=C.UTF-8 dpkg-buildpackage -us -uc -b) && \
	cp "$$tmp/$(DEB)" "$$tmp/$(COCKPIT_DEB)" . && echo "built $(DEB) $(COCKPIT_DEB)"
	lintian --fail-on error $(DEB) $(COCKPIT_DEB)

# rpmbuild --nodeps: the build dependencies are Fedora's names, which Debian's rpm database does not know
# (the Debian packages above stand in for them). The spec's own fallbacks build it without Fedora's macros.
# Two of Fedora's settings Debian's rpm lacks: documentation in /usr/share/doc/NAME (not NAME-VERSION), and
# brp-compress run by bash (it uses `read -d`, which Debian's /bin/sh, dash, does not have: it would
# compress no man page). rpmbuild and rpmlint get the temporary topdir as HOME, so no one's ~/.config changes
# the verdict and an unreadable home (nobody's /nonexistent, once something made it) does not stop the build.
rpm:
	$(call need_debs,$(RPM_BUILD_DEPS),rpm)
	@tmp=$$(mktemp -d /tmp/virtxml-cpu-rpm.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	mkdir -p "$$tmp/SOURCES" "$$tmp/virtxml-cpu-$(RPM_VERSION)" && \
	$(call copy_tree,"$$tmp/virtxml-cpu-$(RPM_VERSION)") && \
	tar --sort=name --owner=0 --group=0 --numeric-owner -czf "$$tmp/SOURCES/virtxml-cpu-$(RPM_VERSION).tar.gz" \
	  -C "$$tmp" "virtxml-cpu-$(RPM_VERSION)" && \
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$$tmp" LC_ALL=C.UTF-8 \
	  rpmbuild -ba --nodeps --define "_topdir $$tmp" --define "_docdir_fmt %%{NAME}" \
	    --define "__brp_compress bash %{_rpmconfigdir}/brp-compress %{?_prefix}" rpm/virtxml-cpu.spec && \
	cp "$$tmp/RPMS/noarch/$(RPM)" "$$tmp/SRPMS/$(SRPM)" $(RPM_OUT)/ && echo "built $(RPM_OUT)/$(RPM) $(RPM_OUT)/$(SRPM)" && \
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$$tmp" LC_ALL=C.UTF-8 \
	  rpmlint -c rpm/rpmlint.toml -r rpm/virtxml-cpu.rpmlintrc $(RPM_OUT)/$(RPM) $(RPM_OUT)/$(SRPM) rpm/virtxml-cpu.spec

bench: $(STAMP)
	$(PY) bench/hook_latency.py
	$(PY) bench/audit_scale.py
	$(PY) bench/file_cost.py
	$(PY) bench/fleet_faults.py
	@if [ "$$(id -u)" = 0 ] && [ -e /dev/kvm ]; then \
	  $(PY) -c 'import libvirt' 2>/dev/null || $(MAKE) --no-print-directory lab; \
	  flock /tmp/virtxml-lab.lock $(PY) bench/hook_start.py; \
	else echo "!!! not root or no /dev/kvm: bench/hook_start.py (the hook's cost to a real guest start) SKIPPED"; fi

clean:
	rm -rf $(VENV) build demo-out .pytest_cache virtxml-cpu_*_all.deb cockpit-virtxml-cpu_*_all.deb \
	  virtxml-cpu-*.noarch.rpm virtxml-cpu-*.src.rpm cockpit/dist cockpit/node_modules
