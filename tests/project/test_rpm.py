"""The RPM (rpm/virtxml-cpu.spec, `make rpm`): it holds the Debian package's files at the places Fedora and
openSUSE use, its command runs from its payload, and its scriptlets reload the right libvirt daemon.

The RPM is the one `make test` built (VIRTXML_CPU_RPM), else built here by `make rpm` (rpmbuild and rpmlint
from Debian's rpm and rpmlint packages; as root it installs them). The .deb compared with is `make test`'s
(VIRTXML_CPU_DEB), else one `make deb` left in the tree, else (as root) built now. The scriptlets run as
rpm runs them (`sh FILE $1`) with a stand-in `systemctl`, the only one on their PATH, that answers
`is-active` as a host of each kind would and records every call.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from virtxml_cpu import __version__
from virtxml_cpu.hook import install

from tests.support import ROOT
from tests.support.packages import ASK_BOTH, POST_CASES, TEXTFILE, deb_entries, mapped, run_scriptlet

RPM_NAME = f"virtxml-cpu-{__version__}-1.noarch.rpm"
SPEC = ROOT / "rpm" / "virtxml-cpu.spec"


def _missing(*tools: str) -> list[str]:
    return [t for t in tools if not shutil.which(t)]


@pytest.fixture(scope="session")
def rpm_file(tmp_path_factory) -> Path:
    given = os.environ.get("VIRTXML_CPU_RPM")
    if given:
        return Path(given)
    if _missing("rpmbuild", "rpmlint") and os.geteuid() != 0:
        pytest.skip("RPM TESTS SKIPPED LOUDLY: no rpmbuild/rpmlint and not root to install them "
                    "(apt-get install rpm rpmlint, or run as root)")
    out = tmp_path_factory.mktemp("rpm")
    r = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "rpm", f"RPM_OUT={out}"],
                       capture_output=True, text=True, timeout=900)
    if r.returncode and os.geteuid() != 0 and "make rpm needs: apt-get install" in r.stdout:
        pytest.skip(f"RPM TESTS SKIPPED LOUDLY: {r.stdout.strip().splitlines()[-1]} (not root to install them)")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "0 errors" in r.stdout, r.stdout[-2000:]  # rpmlint's summary
    return out / RPM_NAME


def rpm_query(rpm: Path, *args: str) -> str:
    return subprocess.run(["rpm", "-qp", *args, str(rpm)], capture_output=True, text=True, check=True).stdout


def rpm_entries(rpm: Path) -> dict[str, tuple[str, str]]:
    """{path: (mode as `ls` shows it, link target)} of every file and directory the RPM owns."""
    out = rpm_query(rpm, "--qf", "[%{FILENAMES}\t%{FILEMODES:perms}\t%{FILELINKTOS}\n]")
    return {path: (mode, link) for path, mode, link in (line.split("\t") for line in out.splitlines())}


def sitelib_of(rpm_paths) -> str:
    (sitelib,) = {m.group(0) for p in rpm_paths for m in [re.match(r"/usr/lib/python3\.\d+/site-packages", p)] if m}
    return sitelib


# Where the .deb's files are in the RPM (first match wins; None: not in the RPM, and why).
def mapping(sitelib: str):
    return [
        (r"/usr/lib/python3/dist-packages/virtxml_cpu-[^/]+\.dist-info/RECORD", None),  # rpm owns the files, not pip (%pyproject_install)
        (r"/usr/share/doc/virtxml-cpu/changelog\.gz", None),  # the spec's %changelog, in the RPM's header
        (r"/usr/share/doc/virtxml-cpu/copyright", None),      # the spec's License: tag
        (r"/lib/systemd/system/(.*)", r"/usr/lib/systemd/system/\1"),           # %{_unitdir}
        (r"/usr/lib/python3/dist-packages/(.*)", sitelib + r"/\1"),            # %{python3_sitelib}
        (r"/usr/share/doc/virtxml-cpu/(.*\.md)\.gz", r"/usr/share/doc/virtxml-cpu/\1"),  # dh_compress; rpm leaves docs
        (r"(.*)", r"\1"),
    ]


RPM_ONLY = {  # in the RPM and not the .deb, and why
    "dist-info/INSTALLER": "`rpm`, as %pyproject_install writes it",
    "__pycache__": "Fedora's rpm byte-compiles at build time (Debian's package does it in postinst)",
}


def test_the_rpm_holds_the_debian_packages_files_at_fedoras_places(rpm_file, deb_file):
    rpm, deb = rpm_entries(rpm_file), deb_entries(deb_file)
    sitelib = sitelib_of(rpm)
    expected = mapped(deb, mapping(sitelib))
    rpm_files = {p: e for p, e in rpm.items() if not e[0].startswith("d")}
    rpm_files = {p: e for p, e in rpm_files.items()
                 if not p.endswith(".dist-info/INSTALLER") and "/__pycache__/" not in p}
    deb_files = {p: e for p, e in expected.items() if not e[0].startswith("d")}
    assert sorted(set(deb_files) - set(rpm_files)) == [], "in the .deb, not the RPM"
    assert sorted(set(rpm_files) - set(deb_files)) == [], "in the RPM, not the .deb"
    assert {p: e for p, e in rpm_files.items()} == deb_files  # modes and link targets too
    assert len(rpm_files) > 100
    # the directories either package creates for itself, the RPM owns (the spool, the hook's qemu.d)
    for directory in ("/var/lib/virtxml-cpu", "/etc/virtxml-cpu", "/etc/libvirt/hooks/qemu.d",
                      "/usr/libexec/virtxml-cpu", f"{sitelib}/virtxml_cpu"):
        assert directory in expected and rpm.get(directory, ("",))[0].startswith("d"), directory
    assert rpm["/etc/libvirt/hooks/qemu.d/virtxml-cpu"] == ("lrwxrwxrwx", "/usr/libexec/virtxml-cpu/qemu-hook")


def test_the_rpm_marks_the_config_noreplace_and_installs_the_man_page_compressed(rpm_file):
    flags = dict(line.split("\t") for line in rpm_query(
        rpm_file, "--qf", "[%{FILENAMES}\t%{FILEFLAGS:fflags}\n]").splitlines())
    assert set(flags["/etc/virtxml-cpu/config.toml"]) == {"c", "n"}  # %config(noreplace)
    assert "d" in flags["/usr/share/doc/virtxml-cpu/README.md"]
    assert "/usr/share/man/man8/virtxml-cpu.8.gz" in flags
    assert rpm_query(rpm_file, "--qf", "%{ARCH} %{LICENSE}") == "noarch GPL-2.0-or-later"


def test_the_rpm_depends_on_lxml_its_python_and_recommends_the_binding(rpm_file):
    requires = rpm_query(rpm_file, "--requires").splitlines()
    sitelib = sitelib_of(rpm_entries(rpm_file))
    version = sitelib.split("python")[1].split("/")[0]
    assert f"python(abi) = {version}" in requires and "python3-lxml" in requires
    assert f"python{version}dist(lxml) >= 4.6" in requires  # from the wheel's metadata
    if tuple(map(int, version.split("."))) < (3, 11):
        assert f"python{version}dist(tomli) >= 1.1" in requires
    else:
        assert not any("tomli" in r or "toml" in r.split()[0] for r in requires), requires
    assert rpm_query(rpm_file, "--recommends").split() == ["python3-libvirt"]


@pytest.fixture(scope="module")
def payload(rpm_file, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("payload")
    subprocess.run(f"rpm2cpio {rpm_file} | cpio -idm --quiet", shell=True, cwd=root, check=True)
    return root


def test_the_rpms_command_runs_from_its_payload(payload, rpm_file):
    sitelib = sitelib_of(rpm_entries(rpm_file))
    command = payload / "usr/bin/virtxml-cpu"
    assert command.read_text().startswith("#!/usr/bin/python3\n")
    r = subprocess.run(["/usr/bin/python3", str(command), "explain", "--no-host-probe", "--qemu-build", "upstream",
                        str(ROOT / "examples" / "fedora-host-model.xml")],
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(payload) + sitelib}, capture_output=True,
                       text=True, timeout=60, cwd="/")
    if r.returncode and "No module named 'lxml'" in r.stderr:
        pytest.skip("SKIPPED LOUDLY: /usr/bin/python3 has no lxml (apt-get install python3-lxml)")
    assert r.returncode in (0, 1) and "kvm-pv-unhalt" in r.stdout, r.stderr


def test_the_rpms_hook_names_its_site_packages_and_the_system_python(payload, rpm_file):
    sitelib = sitelib_of(rpm_entries(rpm_file))
    settings = install.installed_settings((payload / "usr/libexec/virtxml-cpu/qemu-hook").read_text())
    assert settings["PYTHON"] == "/usr/bin/python3" and settings["PACKAGE_DIR"] == sitelib
    assert settings["MODE"] == "audit" and settings["CONFIG"] == ""
    # lxml is compiled: where it is not beside the package (Fedora's lib64), the hook names its directory
    sitearch = subprocess.run(["/usr/bin/python3", "-Ic", "import sysconfig; print(sysconfig.get_path("
                               "'platlib', 'posix_prefix', vars={'base': '/usr', 'platbase': '/usr'}))"],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert settings["LIB_DIRS"] == ("" if sitearch == sitelib else sitearch)


def test_the_rpms_man_page_names_the_documentation_as_the_rpm_installs_it(payload):
    import gzip

    man = gzip.decompress((payload / "usr/share/man/man8/virtxml-cpu.8.gz").read_bytes()).decode()
    assert "/usr/share/doc/virtxml\\-cpu/install.md\\fR" in man and ".md.gz" not in man
    assert (payload / "usr/share/doc/virtxml-cpu/install.md").is_file()


# --- the scriptlets ---

def scriptlets(rpm: Path) -> dict[str, str]:
    """{"postinstall": body, ...} from `rpm -qp --scripts`, each run by /bin/sh."""
    out = rpm_query(rpm, "--scripts")
    parts = re.split(r"^(\w+) scriptlet \(using (\S+)\):\n", out, flags=re.M)
    found = {}
    for name, shell, body in zip(parts[1::3], parts[2::3], parts[3::3]):
        assert shell == "/bin/sh", (name, shell)
        found[name] = body
    return found


SHELLS = [s for s in ("/bin/dash", "/bin/bash") if os.path.exists(s)]  # /bin/sh: dash on Debian, bash on Fedora


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("active, calls", POST_CASES)
def test_post_reloads_virtqemud_when_it_runs_else_libvirtd_else_nothing(rpm_file, tmp_path, shell, active, calls):
    body = scriptlets(rpm_file)["postinstall"]
    for arg in (1, 2):  # install, upgrade
        assert run_scriptlet(tmp_path, body, arg, active, shell) == (0, calls)


@pytest.mark.parametrize("shell", SHELLS)
def test_post_never_fails_the_transaction(rpm_file, tmp_path, shell):
    body = scriptlets(rpm_file)["postinstall"]
    assert run_scriptlet(tmp_path, body, 1, {"libvirtd.service"}, shell, reload_fails=True) == (
        0, ASK_BOTH + ["reload libvirtd.service"])
    assert run_scriptlet(tmp_path, body, 1, set(), shell, systemctl=False) == (0, [])  # no systemd at all


@pytest.fixture
def postun(rpm_file, tmp_path) -> tuple[str, Path]:
    """The postuninstall scriptlet with the metrics file it removes moved into tmp_path (the one change)."""
    body = scriptlets(rpm_file)["postuninstall"]
    assert body.count(TEXTFILE) == 1
    metrics = tmp_path / "virtxml-cpu.prom"
    return body.replace(TEXTFILE, str(metrics)), metrics


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("active, calls", POST_CASES)
def test_postun_on_erase_removes_the_metrics_and_reloads_the_running_daemon(postun, tmp_path, shell, active, calls):
    body, metrics = postun
    metrics.write_text("virtxml_cpu_host_reachable 1\n")
    assert run_scriptlet(tmp_path, body, 0, active, shell) == (0, calls)
    assert not metrics.exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_postun_on_upgrade_leaves_everything(postun, tmp_path, shell):
    """The new package's %post has reloaded already; the hook and the metrics stay."""
    body, metrics = postun
    metrics.write_text("virtxml_cpu_host_reachable 1\n")
    assert run_scriptlet(tmp_path, body, 1, {"virtqemud.service"}, shell) == (0, [])
    assert metrics.exists()


def test_the_rpm_has_no_other_scriptlets_here(rpm_file):
    """Built without systemd's rpm macros (Debian's rpm), only the reload scriptlets are there; on Fedora
    %systemd_post/%systemd_preun/%systemd_postun join them (presets: the units stay disabled)."""
    assert set(scriptlets(rpm_file)) == {"postinstall", "postuninstall"}


def test_the_spec_version_is_the_package_version():
    spec = SPEC.read_text()
    assert re.search(rf"^Version:\s+{re.escape(__version__)}$", spec, flags=re.M)
    assert re.search(rf"^\* .* - {re.escape(__version__)}-1$", spec, flags=re.M)  # the newest %changelog entry


def parsed_spec(*defines: str) -> str:
    args = [a for d in defines for a in ("--define", d)]
    return subprocess.run(["rpmspec", "-P", *args, str(SPEC)], capture_output=True, text=True, check=True).stdout


STAND_INS = ("python3_version 3.13", "python3_sitelib /usr/lib/python3.13/site-packages",
             "python3_sitearch /usr/lib64/python3.13/site-packages")


def test_on_fedora_the_spec_builds_with_pyproject_and_systemd_macros(rpm_file):
    """rpmspec -P with stand-ins for what pyproject-rpm-macros and systemd-rpm-macros define on Fedora:
    the branches Debian's rpm cannot take are there and use them."""
    text = parsed_spec("fedora 43", "pyproject_wheel PYPROJECT_WHEEL", "pyproject_install PYPROJECT_INSTALL",
                       *(f"{m}() {m.upper()} %*" for m in ("systemd_post", "systemd_preun", "systemd_postun",
                                                           "systemd_postun_with_restart")), *STAND_INS)
    units = "virtxml-cpu-audit.timer virtxml-cpu-audit.service virtxml-cpu-watch.service"
    assert "\nPYPROJECT_WHEEL\n" in text and "\nPYPROJECT_INSTALL\n" in text and "pip wheel" not in text
    assert f"%post\nSYSTEMD_POST {units}\n" in text and f"%preun\nSYSTEMD_PREUN {units}\n" in text
    assert "SYSTEMD_POSTUN_WITH_RESTART virtxml-cpu-watch.service\n" in text
    assert "--package-dir /usr/lib/python3.13/site-packages --lib-dir /usr/lib64/python3.13/site-packages" in text
    assert "BuildRequires:  pyproject-rpm-macros" in text and "Group:" not in text


def test_on_opensuse_the_spec_uses_its_service_macros_and_one_python(rpm_file):
    text = parsed_spec("suse_version 1600", "pyproject_wheel PYPROJECT_WHEEL", "pyproject_install PYPROJECT_INSTALL",
                       *(f"{m}() {m.upper()} %*" for m in ("service_add_pre", "service_add_post", "service_del_preun",
                                                           "service_del_postun")), *STAND_INS)
    units = "virtxml-cpu-audit.timer virtxml-cpu-audit.service virtxml-cpu-watch.service"
    for section, macro in (("pre", "SERVICE_ADD_PRE"), ("post", "SERVICE_ADD_POST"), ("preun", "SERVICE_DEL_PREUN"),
                           ("postun", "SERVICE_DEL_POSTUN")):
        assert f"%{section}\n{macro} {units}\n" in text, section
    assert "Group:          System/Management" in text and "BuildRequires:  python-rpm-macros" in text
    assert "pyproject-rpm-macros" not in text
