"""Stand-ins for a QEMU: a process serving QMP with the answers a test chooses, and a libvirt capabilities
cache file naming an emulator."""

from __future__ import annotations

from virtxml_cpu.verify import run as verify

# A stand-in for qemu-system-x86_64: serves QMP on the -chardev socket,fd=N it is handed with the answers in $FAKE_QEMU
# ({"machines": [...], "compat": bool, "props": {"MACHINE/CPU": {prop: bool | null}}, "hang", "fail"}).
FAKE_QEMU = r'''
import json, os, socket, sys, time
spec = json.loads(os.environ["FAKE_QEMU"])
args = sys.argv[1:]
machine = args[args.index("-machine") + 1].split(",")[0]
cpu = args[args.index("-cpu") + 1].split(",")[0] if "-cpu" in args else "-"
chardev = dict(kv.split("=", 1) for kv in args[args.index("-chardev") + 1].split(",")[1:])
if spec.get("fail"):
    print("qemu-system-x86_64: warning: host doesn't support requested feature", file=sys.stderr)
    print(f"qemu-system-x86_64: {spec['fail']}", file=sys.stderr)
    sys.exit(1)
conn = socket.socket(fileno=int(chardev["fd"]))  # the monitor verify handed over
f = conn.makefile("rwb")
def send(msg):
    f.write(json.dumps(msg).encode() + b"\n"); f.flush()
send({"QMP": {"version": {}, "capabilities": []}})
props = spec.get("props", {}).get(f"{machine}/{cpu}", {})
for line in f:
    cmd = json.loads(line)
    name, a, i = cmd["execute"], cmd.get("arguments", {}), cmd.get("id")
    if spec.get("hang") and name != "qmp_capabilities" and machine != "none":
        time.sleep(3600)
    send({"event": "RESUME", "timestamp": {"seconds": 0, "microseconds": 0}})
    if name == "query-version":
        send({"return": {"qemu": {"major": 7, "minor": 2, "micro": 9}, "package": "Fake 1:7.2-1"}, "id": i})
    elif name == "query-machines":
        if "compat-props" in a and not spec.get("compat"):
            send({"error": {"class": "GenericError", "desc": "Parameter 'compat-props' is unexpected"}, "id": i})
        else:
            send({"return": spec["machines"], "id": i})
    elif name == "query-cpu-definitions":
        send({"return": [{"name": n} for n in ("qemu64", "Skylake-Client", "EPYC")], "id": i})
    elif name == "query-cpus-fast":
        send({"return": [{"qom-path": "/machine/unattached/device[0]", "cpu-index": 0}], "id": i})
    elif name == "qom-get":
        v = props.get(a["property"], False)
        if v is None:
            send({"error": {"class": "GenericError", "desc": f"Property 'x86_64-cpu.{a['property']}' not found"}, "id": i})
        else:
            send({"return": v, "id": i})
    elif name == "quit":
        send({"return": {}, "id": i}); break
    else:
        send({"return": {}, "id": i})
'''

MACHINES = [{"name": "pc-i440fx-7.2", "alias": "pc", "is-default": True}, {"name": "pc-i440fx-2.7"},
            {"name": "pc-q35-7.2", "alias": "q35"}, {"name": "none"}, {"name": "xenfv-4.2"}]
# What QEMU 7.2 really gives a named model on pc-i440fx-7.2 (read in the lab).
TRUE_7_2 = {"kvm-pv-eoi": True, "kvmclock": True, "kvm-nopiodelay": True, "kvm-asyncpf": True,
            "kvm-steal-time": True, "kvmclock-stable-bit": True, "x2apic": True, "l3-cache": True}


def named(key="default"):
    return next(m for m in verify.cpu_modes(frozenset({"Skylake-Client", "EPYC"})) if m.key == key)


def caps_cache(directory, emulator: str, package: str, version: int | None = 8002002, machines=()) -> None:
    """A libvirt QEMU capabilities cache file for an x86_64 emulator, named as libvirt names it (sha256 of
    the emulator path); `version` None: without <version>."""
    import hashlib

    directory.mkdir(mode=0o755, exist_ok=True)
    name = hashlib.sha256(emulator.encode()).hexdigest() + ".xml"
    (directory / name).write_text(
        f"<qemuCaps><emulator>{emulator}</emulator><arch>x86_64</arch>"
        + (f"<version>{version}</version>" if version is not None else "") + f"<package>{package}</package>"
        + "".join(f"<machine type='kvm' name='{m}'/>" for m in machines)
        + "<machine type='kvm' name='pc-q35-noble' alias='q35' hotplugCpus='yes'/>"
        "<machine type='kvm' name='pc-i440fx-noble' alias='pc' default='yes'/>"
        "<machine type='tcg' name='pc-tcg-only'/></qemuCaps>")
