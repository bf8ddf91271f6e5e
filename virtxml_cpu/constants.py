"""The tool's own fixed facts, each written once: where it keeps state and settings, its and QEMU's XML
namespaces, the size bound on a definition, the KVM device, the hook's operations, the default connection
and style. A plain module with no imports, so the hook's fast path and the shell front's renderer read it
for nothing."""

STATE_DIR = "/var/lib/virtxml-cpu"  # root's state; everything below it is named here
SPOOL_DIR = STATE_DIR + "/pending"  # queued fixes (hook mode queue); the config's [hook] spool moves it
DIGEST_DIR = STATE_DIR + "/decisions"  # the hook's kept verdicts for repeat starts
VERIFIED_RECORD = STATE_DIR + "/verified.json"  # where `verify` notes a pass
# Directories kept beside the spool (their parent is the spool's parent, so a moved spool moves them too).
INCOMING_BESIDE_SPOOL = "incoming"  # restore/migrate marks (hook/incoming.py)
CAPS_DIGESTS_BESIDE_SPOOL = "qemu-caps"  # digests of libvirt's capabilities cache (host/caps_cache.py)


def beside_spool(spool: str, name: str) -> str:
    """The directory `name` beside `spool` (in its parent, as os.path.dirname and join would put it)."""
    return spool.rstrip("/").rpartition("/")[0].rstrip("/") + "/" + name


CONFIG_PATH = "/etc/virtxml-cpu/config.toml"
LIBVIRT_CONFIG_DIR = "/etc/libvirt/qemu"  # a domain without NAME.xml there is transient

OWN_NS = "urn:virtxml-cpu:domain:1"  # the tool's per-domain metadata (<vxc:cpu policy=.../>)
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"  # <qemu:commandline>

MAX_DEFINITION_BYTES = 10 * 1024 * 1024  # a definition larger than this is refused unread

KVM_DEVICE = "/dev/kvm"

HOOK_OPS = (("prepare", "begin"), ("migrate", "begin"), ("restore", "begin"))  # what the qemu hook acts on

DEFAULT_URI = "qemu:///system"  # the verbs' connection when none is named
DEFAULT_STYLE = "pvspinlock"  # how the fix is written: <features><pvspinlock state='on'/>
MAX_SECONDS = 86400  # the longest timeout an option or the config may give
