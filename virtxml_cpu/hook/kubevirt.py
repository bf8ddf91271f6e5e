"""KubeVirt's onDefineDomain hook, as the sidecar shim runs it: the domain XML virt-launcher is about to
define, with kvm-pv-unhalt added where the rules say so, on stdout.

The contract, as KubeVirt's source defines it (kubevirt/kubevirt d923fdb815cd; docs/xml-hooks.md has the
detail):
- cmd/sidecars/sidecar_shim.go `runOnDefineDomain`: the shim finds `onDefineDomain` on $PATH and runs it
  as exec.Command("onDefineDomain", "--vmi", VMI_JSON, "--domain", DOMAIN_XML): four arguments, the
  values whole, never on stdin. `command.Output()`: stdout is the new domain XML; stderr is kept only for
  the error of a non-zero exit, which the shim returns to virt-launcher as the hook's error.
- pkg/hooks/manager.go `OnDefineDomain`: a hook's error fails the domain's definition (the VMI does not
  start); each call has one minute (context.WithTimeout). pkg/virt-launcher/virtwrap/util/libvirt_helper.go
  `ApplySidecarHooks` unmarshals the returned XML into KubeVirt's DomainSpec (pvspinlock is a field of it:
  virtwrap/api/schema.go FeaturePVSpinlock) and defines the string the hook returned.

So this program always exits 0 for any document: what it cannot do hands the XML back exactly as it came
(argv's bytes, os.fsencode), with one line on stderr (which the shim discards on success). The VMI JSON
is not read: the exemption a VM owner has is KubeVirt's own `features.pvspinlock.enabled: false`, which
reaches the domain XML as <pvspinlock state='off'/>, and the rules keep a domain that says so.
"""

from __future__ import annotations

import os
import sys

from .xmlhook import edit

PREFIX = "virtxml-cpu onDefineDomain: "
EXIT_USAGE = 2  # no --domain: nothing to hand back (the shim always passes one)


def arguments(argv: list[str]) -> dict[str, str]:
    """`--name VALUE` and `--name=VALUE` pairs as the shim passes them (its pflag spelling). A value is
    taken whole, whatever it starts with: the domain XML is one argument."""
    found: dict[str, str] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--") and "=" in word:
            name, _, value = word[2:].partition("=")
            found[name] = value
        elif word.startswith("--") and i + 1 < len(argv):
            found[word[2:]] = argv[i + 1]
            i += 1
        i += 1
    return found


def main(argv: list[str] | None = None, config_path: str | None = None) -> int:
    """The new domain XML on stdout, one line on stderr; 0 whenever there was a document to hand back."""
    argv = sys.argv[1:] if argv is None else argv
    domain = arguments(argv).get("domain")
    if domain is None:
        sys.stderr.write(PREFIX + "no --domain argument: nothing to hand back\n")
        return EXIT_USAGE
    data = os.fsencode(domain)  # the bytes the shim passed, as they came
    try:
        result = edit(data, "domain", config_path)
        out, line = result.output, result.line
    except BaseException as e:  # noqa: BLE001 - edit() does not raise; a signal or MemoryError still passes through
        out, line = data, f"{type(e).__name__}; domain XML passed through unchanged"
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    sys.stderr.write(PREFIX + line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
