/* virtxml-cpu for Cockpit.
 *
 * The page runs the virtxml-cpu command and shows its JSON: `audit --format json` (one record per domain:
 * state, kvm-pv-unhalt, needs_fix and the decision), `explain --format json --all-domains` (machine, CPU
 * mode, the QEMU build and the per-property table), `hook status --format json` (the hook, the local QEMU
 * and its last verify pass), `apply --diff -- NAME...` / `apply --yes -- NAME...` (the fix) and
 * `verify --json -`. No rule of the tool is repeated here: whatever the command says is what the page shows.
 *
 * A domain name is data: whoever may define a domain chooses its name, and libvirt takes `--all` or
 * `--connect=qemu+ext:?command=...` as readily as `web01`. Every command line with names puts `--` before
 * them, so none is ever read as an option: "Fix" passes exactly the names the page lists (askFix).
 */
(function () {
    "use strict";

    var CMD = "virtxml-cpu";
    var LIBVIRT = { err: "message", superuser: "try" }; // libvirt may need administrative access
    var PLAIN = { err: "message" };

    var state = {
        rows: [], // audit domain records, in audit's order
        explained: {}, // domain name -> explain record
        filter: "needs-fix",
        expanded: {},
        hook: null,
        pending: null // the fix the open dialog confirms: list of domain names
    };

    function $(id) { return document.getElementById(id); }

    function el(tag, attrs, children) {
        var node = document.createElement(tag);
        Object.keys(attrs || {}).forEach(function (k) {
            if (k === "text")
                node.textContent = attrs[k];
            else if (k === "className")
                node.className = attrs[k];
            else
                node.setAttribute(k, attrs[k]);
        });
        (children || []).forEach(function (c) {
            if (c !== null && c !== undefined)
                node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
        });
        return node;
    }

    /* ---- running the command ---------------------------------------------------------------------- */

    /* A spawn's promise as {status, out, err}: a non-zero exit is an answer too (audit's 1 means "some
     * domain needs the fix"), only a command that could not run at all is a failure. On exit 0 Cockpit
     * hands stderr (err: "message") over as the second value: apply's summary line is there. */
    function run(argv, opts) {
        return new Promise(function (resolve) {
            cockpit.spawn(argv, opts)
                .then(function (out, err) { resolve({ status: 0, out: out || "", err: err || "" }); },
                      function (ex, out) {
                          resolve({
                              status: ex && ex.exit_status !== undefined && ex.exit_status !== null ? ex.exit_status : -1,
                              problem: ex && ex.problem, out: out || "", err: (ex && ex.message) || ""
                          });
                      });
        });
    }

    function jsonLines(text) {
        return text.split("\n").filter(function (l) { return l.trim() !== ""; }).map(function (l) { return JSON.parse(l); });
    }

    function lastLine(text) {
        var lines = (text || "").split("\n").map(function (l) { return l.trim(); }).filter(Boolean);
        return lines.length ? lines[lines.length - 1] : "";
    }

    /* One clear line for a run that gave no usable answer. */
    function problemLine(r, what) {
        if (r.problem === "not-found" || r.status === 127)
            return "virtxml-cpu is not installed on this host (apt install virtxml-cpu).";
        if (r.problem === "access-denied")
            return "Permission denied running virtxml-cpu: turn on administrative access (the “Limited access” button at the top of the page).";
        if (r.problem)
            return what + ": " + cockpit.message(r.problem);
        var line = lastLine(r.err).replace(/^virtxml-cpu: /, "");
        if (r.status === 2 && /usage:|invalid choice|unrecognized arguments|expected one argument/.test(r.err))
            return "virtxml-cpu on this host is too old for this page (" + line +
                "): install the virtxml-cpu package of the same version as cockpit-virtxml-cpu.";
        /* libvirt refusing this user: the socket's permissions, or its polkit check (which fails outright
         * where polkit cannot be reached on the system bus) */
        if (/[Pp]ermission denied|authentication|not authorized|access denied|polkit|system bus connection/.test(line))
            return "Permission denied talking to libvirt (" + line +
                "): turn on administrative access (the “Limited access” button at the top of the page), or add your user to the libvirt group.";
        if (/cannot connect|Failed to connect|libvirt/.test(line) && r.status === 3)
            return "libvirt is unreachable: " + line;
        return what + " failed" + (r.status > 0 ? " (exit " + r.status + ")" : "") + (line ? ": " + line : "");
    }

    function showError(line) {
        var box = $("vxc-error");
        box.textContent = line || "";
        box.hidden = !line;
    }

    /* ---- loading ---------------------------------------------------------------------------------- */

    function readAudit() {
        return Promise.all([
            run([CMD, "audit", "--format", "json"], LIBVIRT),
            run([CMD, "explain", "--format", "json", "--all-domains"], LIBVIRT)
        ]).then(function (res) {
            var audit = res[0], explain = res[1], records;
            if (audit.status !== 0 && audit.status !== 1) {
                var host = null;
                try {
                    host = jsonLines(audit.out).filter(function (r) { return r.record === "host" && r.error; })[0];
                } catch (e) { /* not JSON: the stderr line says it */ }
                throw new Error(problemLine(host ? { status: 3, err: host.error } : audit, "audit"));
            }
            try {
                records = jsonLines(audit.out);
            } catch (e) {
                throw new Error("virtxml-cpu audit gave output this page cannot read: is virtxml-cpu the same version as this page?");
            }
            var explained = {};
            if (explain.status === 0 || explain.status === 1) {
                jsonLines(explain.out).forEach(function (x) { explained[x.domain] = x; });
            } else if (explain.status !== 2 || !/Domain not found|vanished/.test(explain.err)) {
                throw new Error(problemLine(explain, "explain"));
            }
            state.rows = records.filter(function (r) { return r.record === "domain" && !r.error; })
                .sort(function (a, b) { return a.domain.localeCompare(b.domain, undefined, { numeric: true }); });
            state.explained = explained;
        });
    }

    function readHook() {
        return run([CMD, "hook", "status", "--format", "json"], PLAIN).then(function (r) {
            if (r.status === 0 || r.status === 1) {
                try {
                    state.hook = JSON.parse(r.out);
                    return;
                } catch (e) { /* fall through */ }
            }
            state.hook = { problem: problemLine(r, "hook status") };
        });
    }

    function refresh() {
        $("vxc-refresh").disabled = true;
        return Promise.all([readAudit(), readHook()])
            .then(function () { showError(""); render(); },
                  function (e) { showError(e.message); render(); })
            .then(function () {
                $("vxc-loading").hidden = true;
                $("vxc-refresh").disabled = false;
                document.body.setAttribute("data-loaded", "true");
            });
    }

    /* ---- rendering -------------------------------------------------------------------------------- */

    function managed(row) { return !!row.managed_by; }

    function fixable(row) { return row.needs_fix && !managed(row); }

    /* machine_status as the command reports it (offered | deprecated | not-offered, with
     * machine_status_reason); an older command has none. */
    function machineStatus(row, x) {
        var s = row.machine_status !== undefined ? row.machine_status : x && x.machine_status;
        if (!s)
            return null;
        var word = typeof s === "string" ? s : s.status || s.state || "";
        var why = typeof s === "string" ? (x && x.machine_status_reason) || row.machine_status_reason || ""
            : s.reason || s.detail || "";
        if (!word || /^(ok|current|offered|supported)$/i.test(word))
            return null;
        return el("span", { className: "vxc-badge vxc-badge-warning", text: word.replace(/[_-]/g, " "), title: why });
    }

    function guestOs(g) {
        if (!g)
            return null;
        return typeof g === "string" ? g : g.id || g.os_id || g.name || JSON.stringify(g);
    }

    function decisionCell(row) {
        var d = row.decision || {};
        var head = row.needs_fix
            ? el("span", { className: "vxc-label vxc-label-orange", text: "Needs fix" })
            : el("span", { className: "vxc-label vxc-label-green", text: "Kept" });
        var parts = [head, el("span", { className: "vxc-reason", text: d.reason || "" })];
        if (row.managed_by)
            parts.push(el("div", { className: "vxc-note vxc-note-strong",
                                   text: "No fix here: " + row.managed_by + " owns this definition" }));
        (d.notes || []).forEach(function (n) { parts.push(el("div", { className: "vxc-note", text: n })); });
        var os = guestOs(row.guest_os);
        if (os)
            parts.push(el("div", { className: "vxc-note", text: "Guest OS: " + os }));
        return el("td", { className: "vxc-decision", "data-label": "Decision" }, parts);
    }

    function domainRow(row) {
        var x = state.explained[row.domain];
        var open = !!state.expanded[row.domain];
        var toggle = el("button", { type: "button", className: "vxc-expand", "aria-expanded": String(open),
                                    "data-action": "expand", title: "Per-property table" }, [open ? "▾" : "▸"]);
        toggle.addEventListener("click", function () {
            state.expanded[row.domain] = !state.expanded[row.domain];
            renderRows();
        });
        var machine = x ? (x.machine_resolved && x.machine_resolved !== x.machine
            ? (x.machine || "default") + " → " + x.machine_resolved : x.machine || "(default)") : "?";
        var action = null;
        if (fixable(row)) {
            action = el("button", { type: "button", className: "vxc-btn vxc-btn-secondary vxc-btn-small",
                                    "data-action": "fix" }, ["Fix at next boot"]);
            action.addEventListener("click", function () { askFix([row.domain], "Fix " + row.domain + " at next boot"); });
        }
        var pv = row.pv_unhalt || "?";
        var tr = el("tr", { "data-domain": row.domain, "data-needs-fix": String(!!row.needs_fix),
                            className: "vxc-row" + (open ? " vxc-open" : "") }, [
            el("td", { className: "vxc-col-toggle" }, [toggle]),
            el("td", { className: "vxc-name", "data-label": "Name", text: row.domain }),
            el("td", { "data-label": "State", text: row.state || "" }),
            el("td", { "data-label": "Machine" }, [el("span", { text: machine }), " ", machineStatus(row, x)]),
            el("td", { "data-label": "CPU mode",
                       text: x ? x.cpu_mode + (x.cpu_mode === "custom" && x.cpu_model ? " (" + x.cpu_model + ")" : "") : "?" }),
            el("td", { "data-label": "kvm-pv-unhalt" }, [el("span", { className: "vxc-pv vxc-pv-" + pv, text: pv }),
                row.live_pv_unhalt && row.live_pv_unhalt !== row.pv_unhalt
                    ? el("span", { className: "vxc-note", text: " (running: " + row.live_pv_unhalt + ")" }) : null]),
            decisionCell(row),
            el("td", { className: "vxc-action" }, [action])
        ]);
        var out = [tr];
        if (open)
            out.push(detailRow(row, x));
        return out;
    }

    function detailRow(row, x) {
        var body;
        if (!x) {
            body = el("p", { text: "explain gave nothing for this domain." });
        } else {
            var rows = Object.keys(x.features || {}).map(function (p) {
                var f = x.features[p];
                return el("tr", { "data-property": p }, [
                    el("td", { className: "vxc-mono", text: p }),
                    el("td", {}, [el("span", { className: "vxc-pv vxc-pv-" + f.state, text: f.state })]),
                    el("td", { className: "vxc-mono", text: f.source }),
                    el("td", { text: f.detail })
                ]);
            });
            var d = x.decision || {};
            body = el("div", {}, [
                el("p", { className: "vxc-note",
                          text: "QEMU build: " + x.qemu_build_basis + "; " + x.qemu_release + ". Decision " +
                                d.rule + " (policy " + d.policy + " from " + d.policy_source + ")." }),
                el("table", { className: "vxc-table vxc-props" }, [
                    el("thead", {}, [el("tr", {}, [el("th", { text: "Property" }), el("th", { text: "State" }),
                                                 el("th", { text: "Source" }), el("th", { text: "Reason" })])]),
                    el("tbody", {}, rows)
                ])
            ]);
        }
        return el("tr", { className: "vxc-detail", "data-detail-of": row.domain }, [el("td", { colspan: "8" }, [body])]);
    }

    function renderRows() {
        var shown = state.rows.filter(function (r) { return state.filter === "all" || r.needs_fix; });
        var tbody = $("vxc-rows");
        var frag = document.createDocumentFragment();
        shown.forEach(function (r) { domainRow(r).forEach(function (n) { frag.appendChild(n); }); });
        tbody.textContent = "";
        tbody.appendChild(frag);
        $("vxc-table").hidden = shown.length === 0;
        var empty = $("vxc-empty");
        empty.hidden = shown.length !== 0;
        empty.textContent = state.rows.length === 0 ? "No guests are defined on this host."
            : "No guest needs the fix. Choose “All” to see every guest.";
        document.querySelectorAll("[data-filter]").forEach(function (b) {
            b.setAttribute("aria-pressed", String(b.getAttribute("data-filter") === state.filter));
        });
    }

    function renderSummary() {
        var need = state.rows.filter(function (r) { return r.needs_fix; });
        var fix = need.filter(fixable);
        $("vxc-guests").textContent = String(state.rows.length);
        $("vxc-need").textContent = need.length + (need.length !== fix.length
            ? " (" + (need.length - fix.length) + " managed by an orchestrator: fix those there)" : "");
        $("vxc-fix-all").disabled = fix.length === 0;
        var h = state.hook || {};
        var q = h.qemu;
        $("vxc-qemu").textContent = h.problem ? h.problem
            : q ? q.emulator + " " + q.version + (q.package ? " (" + q.package + ")" : "") : "no local QEMU found";
        var any = state.rows.map(function (r) { return state.explained[r.domain]; }).filter(Boolean)[0];
        $("vxc-build").textContent = any ? any.qemu_build_basis + "; " + any.qemu_release
            : "no guest to read it for";
        var ours = (h.hooks || []).filter(function (k) { return k.ours; })[0];
        $("vxc-hook").textContent = h.problem ? "?" : ours
            ? "installed (" + ours.path + "), mode " + (ours.mode || "from config, else audit") +
                (ours.interpreter_ok ? "" : "; its interpreter is MISSING") +
                ((ours.problems || []).length ? "; UNTRUSTED: " + ours.problems.join("; ") : "")
            : "not installed" + (h.libvirt ? "" : " (libvirt not found)");
        var v = q && q.verified;
        $("vxc-verified").textContent = v ? "passed " + v.at + " (" + v.checks + " checks, virtxml-cpu " + v.tool + ", build " + v.build + ")"
            : q ? "never passed on this QEMU build: run verify" : "?";
    }

    function render() {
        renderSummary();
        renderRows();
    }

    /* ---- the fix ---------------------------------------------------------------------------------- */

    /* The dialog for a fix of exactly these listed domains: `apply --diff -- NAME...` now, `apply --yes --
     * NAME...` on confirming (the same names, kept in state.pending). */
    function askFix(names, title) {
        var dlg = $("vxc-dialog");
        state.pending = names;
        $("vxc-dialog-title").textContent = title;
        $("vxc-dialog-diff").textContent = "Reading what apply would change…";
        $("vxc-dialog-error").hidden = true;
        var confirm = dlg.querySelector("[data-action=confirm]");
        confirm.disabled = true;
        dlg.hidden = false;
        run([CMD, "apply", "--diff", "--"].concat(names), LIBVIRT).then(function (r) {
            if (r.status === 0 || r.status === 1) {
                $("vxc-dialog-diff").textContent = r.out || "(no change: " + lastLine(r.err) + ")";
                confirm.disabled = !r.out;
            } else {
                $("vxc-dialog-diff").textContent = "";
                $("vxc-dialog-error").textContent = problemLine(r, "apply --diff");
                $("vxc-dialog-error").hidden = false;
            }
        });
    }

    function closeDialog() {
        $("vxc-dialog").hidden = true;
        state.pending = null;
    }

    function confirmFix() {
        var names = state.pending;
        if (!names)
            return;
        var confirm = $("vxc-dialog").querySelector("[data-action=confirm]");
        confirm.disabled = true;
        run([CMD, "apply", "--yes", "--"].concat(names), LIBVIRT).then(function (r) {
            var result = $("vxc-action-result");
            if (r.status === 0 || r.status === 1) {
                closeDialog();
                result.textContent = lastLine(r.err.split("\n").filter(function (l) { return !/^virtxml-cpu: note:/.test(l); }).join("\n")) ||
                    "Defined again: the change applies at the next cold boot.";
                result.hidden = false;
                return refresh();
            }
            $("vxc-dialog-error").textContent = problemLine(r, "apply");
            $("vxc-dialog-error").hidden = false;
        });
    }

    /* ---- verify ----------------------------------------------------------------------------------- */

    function runVerify() {
        var btn = $("vxc-verify");
        btn.disabled = true;
        $("vxc-verify-box").hidden = false;
        $("vxc-verify-box").setAttribute("data-state", "running");
        $("vxc-verify-progress").textContent = "Starting QEMU for every machine type…";
        $("vxc-verify-result").textContent = "";
        $("vxc-verify-disagreements").textContent = "";
        var text = "";
        var proc = cockpit.spawn([CMD, "verify", "--json", "-"], { err: "out", superuser: "try" });
        proc.stream(function (chunk) {
            text += chunk;
            var lines = text.split("\n").filter(function (l) { return l.trim() && l.charAt(0) !== "{"; });
            if (lines.length)
                $("vxc-verify-progress").textContent = lines[lines.length - 1];
        });
        function done(status, ex) {
            var lines = text.split("\n").map(function (l) { return l.trim(); }).filter(Boolean);
            var report = null;
            var json = lines.filter(function (l) { return l.charAt(0) === "{"; }).pop();
            if (json) {
                try { report = JSON.parse(json); } catch (e) { report = null; }
            }
            lines = lines.filter(function (l) { return l.charAt(0) !== "{"; });
            var summary = lines.filter(function (l) { return /^verify: /.test(l); }).pop();
            var box = $("vxc-verify-box");
            $("vxc-verify-progress").textContent = "";
            box.setAttribute("data-state", report ? (report.summary.disagreements ? "disagree" : "pass") : "error");
            if (report) {
                $("vxc-verify-result").textContent = summary || ("verify: " + report.summary.checks + " checks, " +
                    report.summary.disagreements + " disagreements");
                var list = $("vxc-verify-disagreements");
                report.disagreements.forEach(function (d) {
                    list.appendChild(el("li", { text: d.machine + " " + d.model + " " + d.prop + ": QEMU " + d.qemu +
                                                      ", tool " + d.tool + " (" + d.source + ": " + d.reason + ")" }));
                });
            } else {
                var line = lastLine(text).replace(/^virtxml-cpu: /, "");
                $("vxc-verify-result").textContent = ex && ex.problem === "not-found"
                    ? "virtxml-cpu is not installed on this host."
                    : "verify could not run: " + (line || (ex && ex.message) || "exit " + status);
            }
            btn.disabled = false;
            readHook().then(renderSummary);
        }
        proc.then(function () { done(0); }, function (ex) { done(ex && ex.exit_status, ex); });
    }

    /* ---- administrative access -------------------------------------------------------------------- */

    /* Every libvirt command runs with superuser "try": turning administrative access on or off (what the
     * permission line asks for) changes what it may read and fix. Cockpit says so on its internal D-Bus
     * (cockpit.Superuser at /superuser, property Current: "init" while it starts, "none" without, else the
     * way it gained root), as Cockpit's own pages read it; on a change the page reads the host again. */
    function watchSuperuser() {
        var proxy;
        try {
            proxy = cockpit.dbus(null, { bus: "internal" }).proxy("cockpit.Superuser", "/superuser");
        } catch (e) {
            return; /* a Cockpit without it: the Refresh button does the same */
        }
        var known = null;
        function allowed() {
            return proxy.valid && proxy.Current && proxy.Current !== "init" ? proxy.Current !== "none" : null;
        }
        function changed() {
            var now = allowed();
            if (now === null || now === known)
                return;
            var first = known === null;
            known = now;
            if (first)
                return; /* the state the page was opened in: the first refresh reads with it */
            if (!$("vxc-dialog").hidden)
                closeDialog(); /* its diff was read with the other access */
            $("vxc-action-result").hidden = true;
            refresh();
        }
        proxy.addEventListener("changed", changed);
        proxy.wait(changed);
    }

    /* ---- wiring ----------------------------------------------------------------------------------- */

    function init() {
        document.querySelectorAll("[data-filter]").forEach(function (b) {
            b.addEventListener("click", function () {
                state.filter = b.getAttribute("data-filter");
                renderRows();
            });
        });
        $("vxc-refresh").addEventListener("click", refresh);
        $("vxc-verify").addEventListener("click", runVerify);
        $("vxc-fix-all").addEventListener("click", function () {
            var names = state.rows.filter(fixable).map(function (r) { return r.domain; });
            if (names.length)
                askFix(names, "Fix " + names.length + " guest" + (names.length === 1 ? "" : "s") + " at next boot");
        });
        var dlg = $("vxc-dialog");
        dlg.querySelector("[data-action=confirm]").addEventListener("click", confirmFix);
        dlg.querySelector("[data-action=cancel]").addEventListener("click", closeDialog);
        document.addEventListener("keydown", function (e) {
            if (e.key === "Escape" && !dlg.hidden)
                closeDialog();
        });
        watchSuperuser();
        refresh();
    }

    if (document.readyState === "loading")
        document.addEventListener("DOMContentLoaded", init);
    else
        init();
}());
