"""Shared fixtures: golden-file switch, fixed host facts, and the real libvirt/QEMU lab."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import lab_skip_reasons, recorded_host, require_lab  # noqa: E402
from virtxml_cpu.core.hostfacts import HostFacts  # noqa: E402


# What the suite exercised, as virt-manager's test_checkprops records XML properties: every rule row that
# applied and every decision rule reached (tests/unit/test_exercised.py checks the totals after a full run).
EXERCISED: dict[str, set] = {"rows": set(), "decisions": set(), "settings": set(), "placement": set()}


def _record_exercise() -> None:
    from virtxml_cpu.core import decision, domain, property_steps

    rule_applies, decide, invalid = property_steps.rule_applies, decision.decide, decision.invalid_exemption
    extract = domain.extract

    def recording_extract(root):
        facts = extract(root)
        EXERCISED["settings"].update(key for key, _value in facts.settings)
        EXERCISED["placement"].update(p.key for p in facts.placement if p.cpus is not None)
        return facts

    def recording_rule_applies(rule, *args):
        applies = rule_applies(rule, *args)
        if applies:
            EXERCISED["rows"].add(id(rule))
        return applies

    def recording_decide(res, pol, style="pvspinlock"):
        d = decide(res, pol, style)
        EXERCISED["decisions"].add(d.rule)
        return d

    def recording_invalid(value):
        d = invalid(value)
        EXERCISED["decisions"].add(d.rule)
        return d

    property_steps.rule_applies, decision.decide, decision.invalid_exemption = (
        recording_rule_applies, recording_decide, recording_invalid)
    domain.extract = recording_extract


def pytest_configure(config):
    _record_exercise()


@pytest.fixture(scope="session")
def exercised() -> dict[str, set]:
    """What the tests so far exercised (EXERCISED), for the test that checks the totals."""
    return EXERCISED


def pytest_collection_modifyitems(config, items):
    """The order the tests need, whatever the file names: a module marked `in_order` runs its tests one after
    another as they are written (they share one state, e.g. the Cockpit page's guests and daemon), and the
    tests marked `last` run after all the others (the exercised totals count what the others reached)."""
    in_order = [i for i, item in enumerate(items) if item.get_closest_marker("in_order") is not None]
    modules = {}
    for i in in_order:
        modules.setdefault(items[i].module, len(modules))
    written = sorted((items[i] for i in in_order), key=lambda item: (modules[item.module], item.location[1]))
    for i, item in zip(in_order, written):
        items[i] = item
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)  # stable: the rest keep their order


# Under pytest-xdist (`make test` as root: --numprocesses=5) the tests run as five units side by side, one a
# worker: the tests that use the host lab's daemons (tests/lab/; they restart them, so they must not
# overlap), the bookworm-backports matrix and each end lab (their own daemons), and the tests that need no
# lab, with the `last` ones last among them (tests/unit/test_exercised.py counts what the others exercised;
# they reach every row).
LAB = "tests/lab/"
OWN_WORKER = {"tests/lab/test_ends.py": ("5.2", "11.1"), "tests/lab/test_qemu.py": ("10.0",)}


def work_unit(nodeid: str) -> str:
    """The xdist work unit of a test: 'FILE[LAB]' for a lab with a worker of its own, 'host-lab' for the other
    lab tests, 'no-lab' for the rest."""
    path, _, rest = nodeid.partition("::")
    key = rest[rest.rfind("[") + 1:-1] if rest.endswith("]") else ""
    if key in OWN_WORKER.get(path, ()):
        return f"{path}[{key}]"
    return "host-lab" if path.startswith(LAB) else "no-lab"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Work units by work_unit() (xdist's own loadgroup marks do not reach its scheduler under this pytest)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByLab(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return work_unit(nodeid)

    return ByLab(config, log)


def pytest_addoption(parser):
    parser.addoption("--regen", action="store_true",
                     help="rewrite the expected golden files from the current output (review the diff!)")


@pytest.fixture(scope="session")
def regen(request) -> bool:
    return request.config.getoption("--regen") or os.environ.get("VIRTXML_CPU_REGEN") == "1"


@pytest.fixture(scope="session")
def host() -> HostFacts:
    return recorded_host()


@pytest.fixture(scope="session")
def lab_up():
    """A running libvirtd with QEMU/KVM; skips (loudly) only without root or /dev/kvm."""
    from tests.lab import harness

    require_lab()
    harness.bring_up()
    return harness


@pytest.fixture(scope="module")
def lab(lab_up):
    """A connection per test module (a module may restart libvirtd)."""
    conn = lab_up.connect()
    lab_up.cleanup(conn)
    yield conn
    try:
        conn = lab_up.connect()
        lab_up.cleanup(conn)
        conn.close()
    except Exception:  # noqa: BLE001 - best effort; the next module cleans up too
        pass


@pytest.fixture(scope="session")
def deb() -> Path:
    """The Debian package `make test` built (VIRTXML_CPU_DEB), else built now by `make deb`."""
    import subprocess

    from virtxml_cpu import __version__

    given = os.environ.get("VIRTXML_CPU_DEB")
    if given:
        return Path(given)
    r = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "deb"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    path = ROOT / f"virtxml-cpu_{__version__}_all.deb"
    assert path.is_file()
    return path


def pytest_terminal_summary(terminalreporter):
    if lab_skip_reasons:
        terminalreporter.write_sep("!", "REAL LIBVIRT/QEMU/KVM TESTS WERE SKIPPED: "
                                   + ", ".join(sorted(set(lab_skip_reasons))) + " (run `make test` as root on a KVM host)",
                                   red=True, bold=True)


@pytest.fixture
def shared():
    """A root-owned directory under /tmp every user can traverse (pytest's temporary root is private to
    root), for tests where another user plants files or links beside root's."""
    d = Path(tempfile.mkdtemp(prefix="vxc-shared-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def unshared():
    """unshared_dir, removed after the test: where a test's venv is made for `hook install`."""
    from tests.support.users import unshared_dir

    d = unshared_dir("vxc-unshared-")
    yield d
    shutil.rmtree(d, ignore_errors=True)
