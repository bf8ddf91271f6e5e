"""The orchestrators' own XML hooks, run as their callers run them: VDSM's before_vm_start hook
(virtxml_cpu/hook/vdsm-hook, hooks/vdsm/before_vm_start/50_virtxml-cpu) and KubeVirt's onDefineDomain
program (contrib/kubevirt/onDefineDomain). For every example and fixture, what each hands back is what
`virtxml-cpu rewrite` prints for the same document (the real command, same config); a document it cannot
parse, an unusable config or a missing interpreter hand the document back unchanged, with one line on
stderr and a status the caller does not take for a failed start.

The callers are modelled on their source, not run (neither VDSM nor KubeVirt runs here: docs/xml-hooks.md):
- `run_like_vdsm` follows oVirt/vdsm fd4b0df20b9b lib/vdsm/common/hooks.py `_runHooksDir` and
  `before_vm_start`: the executables of the hook directory in sorted order, each run with no arguments
  (through `taskset --cpu-list`, lib/vdsm/common/cmdutils.py `wrap_command`), stdout and stderr piped, the
  environment VDSM's own plus the custom properties, `vmId`, PYTHONPATH extended with VDSM's hook module
  and `_hook_domxml` naming a tempfile.mkstemp() file holding the XML; the file is read back from that
  path; any non-zero status raises (HookError, which lib/vdsm/virt/vm.py turns into a failed start).
- `run_like_the_shim` follows kubevirt/kubevirt d923fdb815cd cmd/sidecars/sidecar_shim.go
  `runOnDefineDomain`: `onDefineDomain` looked up on $PATH, the VMI JSON checked to be JSON, then
  exec.Command(onDefineDomain, "--vmi", VMI_JSON, "--domain", DOMAIN_XML).Output(): stdout is the new XML,
  a non-zero exit is the hook's error, which fails the VMI's start (pkg/hooks/manager.go OnDefineDomain).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support import FIXTURES, ROOT

VDSM_FRONT = ROOT / "virtxml_cpu" / "hook" / "vdsm-hook"
SIDECAR_FRONT = ROOT / "contrib" / "kubevirt" / "onDefineDomain"
DOCUMENTS = sorted(FIXTURES.glob("*.xml")) + sorted((ROOT / "examples").glob("*.xml"))
PINNED = 'qemu_build = "upstream"\nqemu_version = "8.2"\n'  # host facts the CLI and the hooks agree on
VDSM_PREFIX = b"virtxml-cpu vdsm hook: "
SIDECAR_PREFIX = b"virtxml-cpu onDefineDomain: "

# A VMI as virt-launcher marshals it for the hook (json.Marshal of v1.VirtualMachineInstance), cut down.
VMI_JSON = json.dumps({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                       "metadata": {"name": "web", "namespace": "prod", "annotations": {
                           "hooks.kubevirt.io/hookSidecars": '[{"args": ["--version", "v1alpha3"], '
                                                             '"image": "registry.example/virtxml-cpu-sidecar:1"}]'}},
                       "spec": {"domain": {"cpu": {"cores": 4}, "devices": {}}}})

# A domain as KubeVirt's converter writes it (xml.MarshalIndent(domainSpec, "", "\t"): tabs, double quotes,
# its metadata in http://kubevirt.io; virtwrap/api/schema.go), the shape virt-launcher hands the hook.
KUBEVIRT_DOMAIN = b"""<domain type="kvm" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">
\t<name>prod_web</name>
\t<memory unit="b">2147483648</memory>
\t<os>
\t\t<type arch="x86_64" machine="pc-q35-8.2">hvm</type>
\t</os>
\t<sysinfo type="smbios">
\t\t<system>
\t\t\t<entry name="uuid">5a1c4c3e-6b9b-5b5e-9c7a-1b2f4d1e0a11</entry>
\t\t\t<entry name="manufacturer">KubeVirt</entry>
\t\t\t<entry name="product">None</entry>
\t\t</system>
\t</sysinfo>
\t<devices>
\t\t<emulator>/usr/libexec/qemu-kvm</emulator>
\t</devices>
\t<metadata>
\t\t<kubevirt xmlns="http://kubevirt.io">
\t\t\t<uid>3f1b8c2e-0d7a-4f4b-9a51-7c2e5d9b1a20</uid>
\t\t</kubevirt>
\t</metadata>
\t<features>
\t\t<acpi></acpi>
\t</features>
\t<cpu mode="host-model">
\t\t<topology sockets="1" cores="4" threads="1"></topology>
\t</cpu>
\t<vcpu placement="static">4</vcpu>
</domain>"""


class HookError(Exception):
    """lib/vdsm/common/exception.py HookError: what a non-zero before_vm_start hook raises."""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A config pinning the host facts, and both fronts as installed with their settings pointing at this
    interpreter and that config (the lines `hook install`-like rendering changes; nothing else)."""
    d = tmp_path_factory.mktemp("xmlhooks")
    (d / "config.toml").write_text(PINNED + spool_in(d))
    hooks = d / "hooks" / "before_vm_start"
    hooks.mkdir(parents=True)
    render(VDSM_FRONT, hooks / "50_virtxml-cpu", PYTHONS=f"/nonexistent/python3 {sys.executable}",
           CONFIG=str(d / "config.toml"))
    (d / "bin").mkdir()
    render(SIDECAR_FRONT, d / "bin" / "onDefineDomain", PYTHON=sys.executable, LIB_DIR="",
           CONFIG=str(d / "config.toml"))
    return d


def spool_in(d: Path) -> str:
    """The [hook] table keeping what the hooks' host sources keep (libvirt's capabilities cache parsed,
    beside the spool) in `d`, not in the host's /var/lib/virtxml-cpu."""
    return f'[hook]\nspool = "{d}/spool/pending"\n'


def render(src: Path, dst: Path, **settings: str) -> None:
    """`src` with each `NAME='...'` setting line given the value, made executable."""
    lines = src.read_text().split("\n")
    for name, value in settings.items():
        (i,) = [n for n, line in enumerate(lines) if line.startswith(f"{name}=")]
        lines[i] = f"{name}='{value}'"
    dst.write_text("\n".join(lines))
    dst.chmod(0o755)


@functools.lru_cache(maxsize=None)
def cli_rewrite(doc: Path, config: Path) -> bytes:
    """What `virtxml-cpu rewrite` prints for `doc` under `config`: the reference. The config pins the QEMU
    build and release, and the command asks the host nothing else (--no-host-probe): the facts a hook has
    where it runs (the sidecar has no libvirt cache and no /dev/kvm; VDSM's user may read neither). The
    hooks still read what they may: on this host libvirt's capabilities cache names QEMU 7.2's machines for
    /usr/bin/qemu-system-x86_64, which changes no decision of these documents."""
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "rewrite", "--no-host-probe", "--config", str(config),
                        str(doc)],
                       capture_output=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


def run_like_vdsm(hooks_dir: Path, data: bytes, custom: dict | None = None, vm_id: str = "vm-1"):
    """VDSM's before_vm_start for `data`: (the XML it goes on with, [(rc, stderr) per hook]); raises
    HookError as hooks.before_vm_start does when a hook exited non-zero."""
    scripts = sorted(str(p) for p in hooks_dir.glob("*") if p.is_file() and os.access(p, os.X_OK))
    fd, name = tempfile.mkstemp()
    results = []
    try:
        os.write(fd, data)
        os.close(fd)
        env = dict(os.environ)
        env.update(custom or {})
        env["vmId"] = vm_id
        env["PYTHONPATH"] = ":".join(env.get("PYTHONPATH", "").split(":") + ["/usr/lib/python3.9/site-packages/vdsm/hook"])
        env["_hook_domxml"] = name
        taskset = shutil.which("taskset")
        for s in scripts:
            args = ([taskset, "--cpu-list", f"0-{os.cpu_count() - 1}"] if taskset else []) + [s]
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=120)
            results.append((p.returncode, p.stderr))
            if p.returncode == 2:
                break
        with open(name, "rb") as f:
            final = f.read()
        mode = os.stat(name).st_mode & 0o7777
    finally:
        os.unlink(name)
    if any(rc for rc, _ in results):
        raise HookError(results[-1][1])
    return final, results, mode


def run_like_the_shim(bin_dir: Path, domain: bytes, vmi: str = VMI_JSON, env_extra: dict | None = None):
    """The shim's runOnDefineDomain for `domain`: (rc, stdout, stderr)."""
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CONTAINER_NAME": "hook-sidecar-0", **(env_extra or {})}
    program = shutil.which("onDefineDomain", path=env["PATH"])  # exec.LookPath
    assert program == str(bin_dir / "onDefineDomain")
    json.loads(vmi)  # the shim refuses a VMI it cannot unmarshal before running anything
    p = subprocess.run([b"onDefineDomain", b"--vmi", vmi.encode(), b"--domain", domain], env=env,
                       capture_output=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def one_line(stderr: bytes, prefix: bytes) -> bytes:
    assert stderr.startswith(prefix) and stderr.endswith(b"\n") and stderr.count(b"\n") == 1, stderr
    return stderr


# --- every example and fixture: the hook hands back what rewrite prints -------------------------------------

@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.name)
def test_vdsm_hook_gives_what_rewrite_gives(workdir, doc):
    data = doc.read_bytes()
    want = cli_rewrite(doc, workdir / "config.toml")
    final, results, mode = run_like_vdsm(workdir / "hooks" / "before_vm_start", data)
    assert final == want
    ((rc, err),) = results
    assert rc == 0 and mode == 0o600  # mkstemp's file, replaced under its own name with its mode kept
    line = one_line(err, VDSM_PREFIX)
    assert (b": added kvm-pv-unhalt (" in line) == (want != data), line
    assert b"vm vm-1: " in line


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.name)
def test_sidecar_prints_what_rewrite_gives(workdir, doc):
    data = doc.read_bytes()
    want = cli_rewrite(doc, workdir / "config.toml")
    rc, out, err = run_like_the_shim(workdir / "bin", data)
    assert rc == 0 and out == want
    line = one_line(err, SIDECAR_PREFIX)
    assert (b": added kvm-pv-unhalt (" in line) == (want != data), line


def test_the_documents_include_both_outcomes(workdir):
    """The comparisons above would hold for a hook that changed nothing only if rewrite changed nothing."""
    changed = sum(cli_rewrite(d, workdir / "config.toml") != d.read_bytes() for d in DOCUMENTS)
    assert 10 <= changed < len(DOCUMENTS)


def test_kubevirt_shaped_domain_gains_pvspinlock_where_kubevirt_reads_it(workdir, tmp_path):
    """Go's tab-indented marshalling kept byte for byte, <pvspinlock state='on'/> added inside <features>,
    where KubeVirt's DomainSpec has it (virtwrap/api/schema.go Features.PVSpinlock)."""
    doc = tmp_path / "kubevirt.xml"
    doc.write_bytes(KUBEVIRT_DOMAIN)
    want = cli_rewrite(doc, workdir / "config.toml")
    rc, out, err = run_like_the_shim(workdir / "bin", KUBEVIRT_DOMAIN)
    assert rc == 0 and out == want
    assert out == KUBEVIRT_DOMAIN.replace(b"\t\t<acpi></acpi>\n", b'\t\t<acpi></acpi>\n\t\t<pvspinlock state="on"/>\n')
    final, _, _ = run_like_vdsm(workdir / "hooks" / "before_vm_start", KUBEVIRT_DOMAIN)
    assert final == want


# --- what it cannot use is handed back unchanged, and the start goes on ----------------------------------

BROKEN = [b"", b"not xml at all", b"<domain type='kvm'><name>x</name>", b"<?xml version='1.0'?>\n<domain>\xff</domain>",
          b"<!DOCTYPE d [<!ENTITY e 'x'>]><domain type='kvm'>&e;</domain>"]


@pytest.mark.parametrize("data", BROKEN, ids=range(len(BROKEN)))
def test_vdsm_hook_passes_an_unparsable_document_through(workdir, data):
    final, ((rc, err),), _ = run_like_vdsm(workdir / "hooks" / "before_vm_start", data)
    assert rc == 0 and final == data
    assert b"passed through unchanged" in one_line(err, VDSM_PREFIX)


@pytest.mark.parametrize("data", BROKEN[1:], ids=range(1, len(BROKEN)))
def test_sidecar_passes_an_unparsable_document_through(workdir, data):
    rc, out, err = run_like_the_shim(workdir / "bin", data)
    assert rc == 0 and out == data
    assert b"passed through unchanged" in one_line(err, SIDECAR_PREFIX)


def test_an_exemption_in_metadata_is_honoured_by_both(workdir, tmp_path):
    """exempt-by-metadata.xml says policy='never'; without that line the same document is changed, and a
    config asking for `always` does not override the domain's own word."""
    config = tmp_path / "always.toml"
    config.write_text(PINNED + 'policy = "always"\n' + spool_in(tmp_path))
    hooks, bin_dir = tmp_path / "before_vm_start", tmp_path / "bin"
    hooks.mkdir()
    bin_dir.mkdir()
    render(VDSM_FRONT, hooks / "50_virtxml-cpu", PYTHONS=sys.executable, CONFIG=str(config))
    render(SIDECAR_FRONT, bin_dir / "onDefineDomain", PYTHON=sys.executable, LIB_DIR="", CONFIG=str(config))
    exempt = (FIXTURES / "exempt-by-metadata.xml").read_bytes()
    line = [raw for raw in exempt.split(b"\n") if b"vxc:cpu" in raw]
    assert len(line) == 1
    plain = exempt.replace(line[0] + b"\n", b"")
    for data, changed in ((exempt, False), (plain, True)):
        final, ((rc, err),), _ = run_like_vdsm(hooks, data)
        assert rc == 0 and (final != data) == changed, err
        rc, out, err2 = run_like_the_shim(bin_dir, data)
        assert rc == 0 and out == final
        if not changed:
            assert b"(policy-never)" in one_line(err, VDSM_PREFIX) and b"(policy-never)" in one_line(err2, SIDECAR_PREFIX)


def test_an_unusable_config_passes_the_document_through(workdir, tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('policy = "sometimes"\n')
    hooks, bin_dir = tmp_path / "before_vm_start", tmp_path / "bin"
    hooks.mkdir()
    bin_dir.mkdir()
    render(VDSM_FRONT, hooks / "50_virtxml-cpu", PYTHONS=sys.executable, CONFIG=str(config))
    render(SIDECAR_FRONT, bin_dir / "onDefineDomain", PYTHON=sys.executable, LIB_DIR="", CONFIG=str(config))
    data = (ROOT / "examples" / "fedora-host-model.xml").read_bytes()
    assert cli_rewrite(ROOT / "examples" / "fedora-host-model.xml", workdir / "config.toml") != data
    final, ((rc, err),), _ = run_like_vdsm(hooks, data)
    assert rc == 0 and final == data and b"sometimes" in one_line(err, VDSM_PREFIX)
    rc, out, err = run_like_the_shim(bin_dir, data)
    assert rc == 0 and out == data and b"sometimes" in one_line(err, SIDECAR_PREFIX)


def test_no_usable_interpreter_passes_the_document_through(tmp_path):
    """EL8's /usr/bin/python3 is 3.6: a front finding no Python 3.9+ with virtxml_cpu starts the guest as
    it was. Here: interpreters that do not exist, and one that is there but cannot import virtxml_cpu."""
    hooks, bin_dir = tmp_path / "before_vm_start", tmp_path / "bin"
    hooks.mkdir()
    bin_dir.mkdir()
    bare = shutil.which("python3", path="/usr/bin:/bin")
    no_package = subprocess.run([bare, "-I", "-c", "import virtxml_cpu"], capture_output=True).returncode != 0
    render(VDSM_FRONT, hooks / "50_virtxml-cpu", PYTHONS=f"/nonexistent/python3 {bare if no_package else ''}")
    render(SIDECAR_FRONT, bin_dir / "onDefineDomain", PYTHON="/nonexistent/python3")
    data = (ROOT / "examples" / "fedora-host-model.xml").read_bytes()
    final, ((rc, err),), _ = run_like_vdsm(hooks, data)
    assert rc == 0 and final == data and b"passed through unchanged" in one_line(err, VDSM_PREFIX)
    rc, out, err = run_like_the_shim(bin_dir, data)
    assert rc == 0 and out == data and b"passed through unchanged" in one_line(err, SIDECAR_PREFIX)


def test_no_custom_property_or_variable_steers_the_vdsm_hook(workdir, tmp_path):
    """VDSM turns a VM's custom properties into environment variables, and extends PYTHONPATH: neither
    VIRTXML_CPU_CONFIG, nor a planted module on PYTHONPATH, nor a file named in the XML reaches the hook."""
    never = tmp_path / "never.toml"
    never.write_text('policy = "never"\n')
    planted = tmp_path / "planted"
    (planted / "virtxml_cpu" / "hook").mkdir(parents=True)
    for init in ("virtxml_cpu/__init__.py", "virtxml_cpu/hook/__init__.py"):
        (planted / init).write_text("")
    (planted / "virtxml_cpu" / "hook" / "vdsm.py").write_text("def main(**kw):\n    raise SystemExit(0)\n")
    data = (ROOT / "examples" / "fedora-host-model.xml").read_bytes()
    final, ((rc, err),), _ = run_like_vdsm(workdir / "hooks" / "before_vm_start", data,
                                           custom={"VIRTXML_CPU_CONFIG": str(never), "PYTHONPATH": str(planted)})
    assert rc == 0 and final == cli_rewrite(ROOT / "examples" / "fedora-host-model.xml", workdir / "config.toml")
    assert final != data and b"added kvm-pv-unhalt" in one_line(err, VDSM_PREFIX)


def test_vdsm_hook_without_its_variable_changes_nothing_and_exits_0(workdir):
    r = subprocess.run([str(workdir / "hooks" / "before_vm_start" / "50_virtxml-cpu")], capture_output=True,
                       env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 0 and b"_hook_domxml is not set" in one_line(r.stderr, VDSM_PREFIX)


def test_sidecar_without_a_domain_argument_says_so(workdir):
    r = subprocess.run([str(workdir / "bin" / "onDefineDomain"), "--vmi", VMI_JSON], capture_output=True,
                       timeout=60)
    assert r.returncode == 2 and r.stdout == b"" and b"no --domain" in one_line(r.stderr, SIDECAR_PREFIX)


def test_a_failing_before_vm_start_hook_would_fail_the_start(tmp_path):
    """The harness keeps VDSM's word: status 1 (hooking.py: "failed, other hooks should be processed")
    still fails a before_vm_start, which is why the hook never exits non-zero."""
    hooks = tmp_path / "before_vm_start"
    hooks.mkdir()
    (hooks / "10_fails").write_text("#!/bin/sh\necho broken >&2\nexit 1\n")
    (hooks / "10_fails").chmod(0o755)
    with pytest.raises(HookError):
        run_like_vdsm(hooks, b"<domain/>")


def test_the_checkout_entry_points_are_the_packaged_fronts():
    link = ROOT / "hooks" / "vdsm" / "before_vm_start" / "50_virtxml-cpu"
    assert link.is_symlink() and link.resolve() == VDSM_FRONT.resolve()
    assert os.access(VDSM_FRONT, os.X_OK) and os.access(SIDECAR_FRONT, os.X_OK)
    containerfile = (ROOT / "contrib" / "kubevirt" / "Containerfile").read_text()
    assert "COPY contrib/kubevirt/onDefineDomain /usr/bin/onDefineDomain" in containerfile
    assert "LIB_DIR='/opt/virtxml-cpu'" in SIDECAR_FRONT.read_text() and "--target /opt/virtxml-cpu" in containerfile


def test_the_vm_example_asks_for_the_sidecar_as_kubevirt_reads_the_annotation():
    """pkg/hooks/hooks.go: the annotation hooks.kubevirt.io/hookSidecars on the VMI, a JSON list of
    HookSidecar; a VM passes it on from spec.template.metadata; the shim takes --version v1alpha1..3."""
    import yaml

    vm = yaml.safe_load((ROOT / "contrib" / "kubevirt" / "vm-with-virtxml-cpu-sidecar.yaml").read_text())
    assert (vm["apiVersion"], vm["kind"]) == ("kubevirt.io/v1", "VirtualMachine")
    assert "annotations" not in vm["metadata"]
    (sidecar,) = json.loads(vm["spec"]["template"]["metadata"]["annotations"]["hooks.kubevirt.io/hookSidecars"])
    assert set(sidecar) <= {"image", "imagePullPolicy", "command", "args", "configMap", "pvc"}
    assert sidecar["args"][0] == "--version" and sidecar["args"][1] in ("v1alpha1", "v1alpha2", "v1alpha3")
    assert sidecar["image"] and "command" not in sidecar  # the image's entrypoint, the shim, stays
    assert "pvspinlock" not in json.dumps(vm["spec"]["template"]["spec"]["domain"])  # the sidecar decides


def _system_python_with_lxml() -> bool:
    return subprocess.run(["/usr/bin/python3", "-I", "-c", "import lxml.etree"], capture_output=True).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not _system_python_with_lxml(),
                    reason="SKIPPED LOUDLY: running the VDSM hook as an unprivileged user needs root, setpriv and "
                           "/usr/bin/python3 with lxml")
def test_vdsm_hook_as_an_unprivileged_user_like_vdsm(tmp_path):
    """VDSM runs hooks as its user (vdsm), the XML in a mkstemp file of its own: here uid 65534 with no
    groups, in a directory only that user may write, the interpreter a venv of the system Python (one that
    user may run) seeing this checkout's package. The file is rewritten as rewrite rewrites it, and stays
    that user's, mode 0600; root's config is trusted."""
    uid = gid = 65534
    top = Path(tempfile.mkdtemp(prefix="vxc-vdsm-", dir="/tmp"))
    try:
        top.chmod(0o755)
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages", str(top / "py")],
                       check=True, capture_output=True)
        (site,) = (top / "py" / "lib").glob("python3*/site-packages")
        (site / "virtxml_cpu_checkout.pth").write_text(f"{ROOT}\n")
        config = top / "config.toml"
        config.write_text(PINNED + spool_in(top))  # root's: not writable by the hook's user
        hooks = top / "before_vm_start"
        hooks.mkdir()
        hooks.chmod(0o755)
        render(VDSM_FRONT, hooks / "50_virtxml-cpu", PYTHONS=str(top / "py" / "bin" / "python3"), CONFIG=str(config))
        private = top / "vdsm-tmp"
        private.mkdir(mode=0o700)
        os.chown(private, uid, gid)
        src = ROOT / "examples" / "fedora-host-model.xml"
        domxml = private / "tmpabc123"
        domxml.write_bytes(src.read_bytes())
        os.chown(domxml, uid, gid)
        domxml.chmod(0o600)
        env = {"PATH": "/usr/bin:/bin", "_hook_domxml": str(domxml), "vmId": "vm-2", "HOME": "/"}
        r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                            str(hooks / "50_virtxml-cpu")], capture_output=True, env=env, cwd="/", timeout=120)
        assert r.returncode == 0, r.stderr
        assert b"added kvm-pv-unhalt" in one_line(r.stderr, VDSM_PREFIX)
        assert domxml.read_bytes() == cli_rewrite(src, config) != src.read_bytes()
        st = domxml.stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (uid, gid, 0o600)
        assert sorted(p.name for p in private.iterdir()) == ["tmpabc123"]  # no temporary file left
    finally:
        shutil.rmtree(top)
