/* virtxml-cpu for Cockpit: every libvirt guest's kvm-pv-unhalt (paravirtual spinlocks), why, and the fix.
 *
 * Everything shown comes from one command, `virtxml-cpu audit --follow --format json` (docs/live.md,
 * "Following a host"): its hello record (the schema's version and the hook's status), a snapshot of every
 * domain's record, then each domain's record again as libvirt reports it defined, started, stopped or
 * undefined. No rule of the tool is repeated here: whether a row gets a fix button is the record's
 * `fixable`. Actions run `apply --diff|--yes -- NAME...` (names after `--`: a domain named `--all` is that
 * domain) and `verify --json -`.
 */
import React, { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Alert } from "@patternfly/react-core/dist/esm/components/Alert/index.js";
import { Button } from "@patternfly/react-core/dist/esm/components/Button/index.js";
import { Card, CardBody, CardHeader, CardTitle } from "@patternfly/react-core/dist/esm/components/Card/index.js";
import { CodeBlock, CodeBlockCode } from "@patternfly/react-core/dist/esm/components/CodeBlock/index.js";
import { DescriptionList, DescriptionListDescription, DescriptionListGroup, DescriptionListTerm } from "@patternfly/react-core/dist/esm/components/DescriptionList/index.js";
import { EmptyState, EmptyStateBody } from "@patternfly/react-core/dist/esm/components/EmptyState/index.js";
import { Flex, FlexItem } from "@patternfly/react-core/dist/esm/layouts/Flex/index.js";
import "@patternfly/react-styles/css/components/Label/label.css";
import { List, ListItem } from "@patternfly/react-core/dist/esm/components/List/index.js";
import { Modal, ModalVariant } from "@patternfly/react-core/dist/esm/components/Modal/index.js";
import { Page, PageSection } from "@patternfly/react-core/dist/esm/components/Page/index.js";
import { Spinner } from "@patternfly/react-core/dist/esm/components/Spinner/index.js";
import { Text, TextContent } from "@patternfly/react-core/dist/esm/components/Text/index.js";
import { ToggleGroup, ToggleGroupItem } from "@patternfly/react-core/dist/esm/components/ToggleGroup/index.js";
import { Toolbar, ToolbarContent, ToolbarItem } from "@patternfly/react-core/dist/esm/components/Toolbar/index.js";
import { Tooltip } from "@patternfly/react-core/dist/esm/components/Tooltip/index.js";
import { ExpandableRowContent, Table, Tbody, Td, Th, Thead, Tr } from "@patternfly/react-table/dist/esm/components/Table/index.js";

import cockpit from "./cockpit.js";

const _ = cockpit.gettext;
const CMD = "virtxml-cpu";
const SCHEMA = 2; // live/records.py SCHEMA_VERSION this page is written against
const LIBVIRT = { err: "message", superuser: "try" }; // libvirt may need administrative access
const FOLLOW = [CMD, "audit", "--follow", "--format", "json"];

/* libvirt's words for a domain's state and the tool's for kvm-pv-unhalt, in the page's language. */
const STATES = {
    running: _("running"), blocked: _("blocked"), paused: _("paused"), shutdown: _("shutting down"),
    "shut off": _("shut off"), crashed: _("crashed"), suspended: _("suspended"), "no state": _("no state"),
};
const PV = { on: _("on"), off: _("off"), "host-dependent": _("host-dependent") };
const MACHINE = { deprecated: _("deprecated"), "not-offered": _("not offered") };

/* A command's promise as {status, out, err, problem}: a non-zero exit is an answer (audit's and apply's
 * statuses are documented), only a command that could not run at all has `problem`. */
function run(argv, opts) {
    return new Promise(resolve => {
        cockpit.spawn(argv, opts).then(
            (out, err) => resolve({ status: 0, out: out || "", err: err || "" }),
            (ex, out) => resolve({
                    status: ex && ex.exit_status != null ? ex.exit_status : -1,
                problem: ex && ex.problem, out: out || "", err: (ex && ex.message) || "",
            }));
    });
}

function lastLine(text) {
    const lines = (text || "").split("\n").map(l => l.trim()).filter(Boolean);
    return lines.length ? lines[lines.length - 1] : "";
}

/* One line for a command that could not run, by Cockpit's problem code and the exit statuses
 * docs/exit-status.md names. */
function commandProblem(r, what) {
    if (r.problem === "not-found" || r.status === 127)
        return _("virtxml-cpu is not installed on this host (apt install virtxml-cpu).");
    if (r.problem === "access-denied")
        return _("Permission denied running virtxml-cpu: turn on administrative access (the “Limited access” button at the top of the page).");
    if (r.problem)
        return cockpit.format(_("$0: $1"), what, cockpit.message(r.problem));
    if (r.status === 2)
        return cockpit.format(_("virtxml-cpu on this host does not accept what this page asks of it ($0, exit 2): install the virtxml-cpu package of the same version as cockpit-virtxml-cpu."), what);
    return cockpit.format(_("$0 failed (exit $1): $2"), what, r.status, lastLine(r.err));
}

const tooOld = version => cockpit.format(
    _("virtxml-cpu on this host writes records of schema $0, this page reads schema $1: install the virtxml-cpu package of the same version as cockpit-virtxml-cpu."),
    version === undefined ? _("(none)") : String(version), String(SCHEMA));

function connectionProblem(rec) {
    if (rec.condition === "denied")
        return cockpit.format(_("Permission denied talking to libvirt ($0): turn on administrative access (the “Limited access” button at the top of the page), or add your user to the libvirt group."), rec.error);
    if (rec.condition === "timed_out")
        return cockpit.format(_("libvirt does not answer: $0"), rec.error);
    return cockpit.format(_("libvirt is unreachable: $0"), rec.error);
}

const collator = new Intl.Collator(undefined, { numeric: true });
const byName = (a, b) => collator.compare(a.domain, b.domain);

/* PatternFly's label, as its markup and classes: the Label component measures its text in a layout
 * effect (for a truncation tooltip these short words never need), which forces a layout per label; 200
 * rows made that most of the page's first render. */
function RowLabel({ color, compact, className, children }) {
    return (
        <span className={`pf-v5-c-label pf-m-${color}${compact ? " pf-m-compact" : ""}${className ? " " + className : ""}`}>
            <span className="pf-v5-c-label__content"><span className="pf-v5-c-label__text">{children}</span></span>
        </span>
    );
}

/* Follows the host through `audit --follow`: {rows, hook, error, loaded}; restart() starts it again
 * (administrative access changed). */
function useHost() {
    const [state, setState] = useState({ rows: new Map(), hook: null, error: null, loaded: false });
    const proc = useRef(null);

    const start = useCallback(() => {
        if (proc.current)
            proc.current.close("cancelled");
        let buffer = "";
        let pending = [];
        let hello = null;
        let stopped = false;
        const set = fn => { if (!stopped) setState(fn); };
        const fail = line => set(s => ({ ...s, rows: new Map(), error: line, loaded: true }));

        function handle(rec) {
            if (!hello) {
                if (rec.record !== "hello" || rec.version !== SCHEMA) {
                    stopped = true;
                    setState(s => ({ ...s, rows: new Map(), error: tooOld(rec.version), loaded: true }));
                    p.close("cancelled");
                    return;
                }
                hello = rec;
                performance.mark("vxc-hello");
            } else if (rec.record === "hook") {
                set(s => ({ ...s, hook: rec.status }));
            } else if (rec.record === "domain") {
                pending.push(rec);
            } else if (rec.record === "summary") {
                if (rec.version !== SCHEMA)
                    return fail(tooOld(rec.version));
                performance.mark("vxc-snapshot");
                const rows = new Map(pending.filter(row => !row.error).sort(byName).map(row => [row.uuid, row]));
                pending = [];
                set(s => ({ ...s, rows, error: null, loaded: true }));
            } else if (rec.record === "event") {
                set(s => {
                    const rows = new Map(s.rows);
                    if (rec.row && !rec.row.error)
                        rows.set(rec.uuid, rec.row);
                    else
                        rows.delete(rec.uuid);
                    return { ...s, rows: new Map([...rows.values()].sort(byName).map(row => [row.uuid, row])) };
                });
            } else if (rec.record === "connection") {
                pending = [];
                fail(connectionProblem(rec));
            }
        }

        performance.mark("vxc-spawn");
        const p = cockpit.spawn(FOLLOW, LIBVIRT);
        proc.current = p;
        p.stream(chunk => {
            buffer += chunk;
            const lines = buffer.split("\n");
            buffer = lines.pop();
            for (const line of lines) {
                if (stopped || !line.trim())
                    continue;
                let rec;
                try {
                    rec = JSON.parse(line);
                } catch (e) {
                    stopped = true;
                    setState(s => ({ ...s, rows: new Map(), error: tooOld(undefined), loaded: true }));
                    p.close("cancelled");
                    return;
                }
                handle(rec);
            }
        });
        p.then(() => { if (!stopped) fail(_("virtxml-cpu audit --follow stopped.")) },
               ex => {
                   if (stopped || (ex && ex.problem === "cancelled"))
                       return;
                   const status = ex && ex.exit_status != null ? ex.exit_status : -1;
                   fail(commandProblem({ status, problem: ex && ex.problem, err: ex && ex.message }, "audit --follow"));
               });
        return () => { stopped = true; p.close("cancelled") };
    }, []);

    useEffect(() => {
        const stop = start();
        return () => { stop(); proc.current = null };
    }, [start]);

    const readHook = useCallback(() => run([CMD, "hook", "status", "--format", "json"], { err: "message" }).then(r => {
        if (r.status === 0 || r.status === 1)
            setState(s => ({ ...s, hook: JSON.parse(r.out) }));
    }), []);

    return { ...state, restart: start, readHook };
}

/* Cockpit's administrative access (cockpit.Superuser on Cockpit's internal D-Bus, as Cockpit's own pages
 * read it): every command runs with superuser "try", so a change means reading the host again. */
function useSuperuserChange(onChange) {
    useEffect(() => {
        let proxy;
        try {
            proxy = cockpit.dbus(null, { bus: "internal" }).proxy("cockpit.Superuser", "/superuser");
        } catch (e) {
            return undefined;
        }
        let known = null;
        const changed = () => {
            const now = proxy.valid && proxy.Current && proxy.Current !== "init" ? proxy.Current !== "none" : null;
            if (now === null || now === known)
                return;
            const first = known === null;
            known = now;
            if (!first)
                onChange();
        };
        proxy.addEventListener("changed", changed);
        proxy.wait(changed);
        return () => proxy.removeEventListener("changed", changed);
    }, [onChange]);
}

function HookSummary({ hook }) {
    if (!hook)
        return "…";
    const ours = (hook.hooks || []).find(k => k.ours);
    if (!ours)
        return hook.libvirt ? _("not installed") : _("not installed (libvirt not found)");
    let text = cockpit.format(_("installed ($0), mode $1"), ours.path, ours.mode || _("from config, else audit"));
    if (!ours.interpreter_ok)
        text += "; " + _("its interpreter is MISSING");
    if ((ours.problems || []).length)
        text += "; " + cockpit.format(_("UNTRUSTED: $0"), ours.problems.join("; "));
    return text;
}

function Summary({ rows, hook, actions }) {
    const all = [...rows.values()];
    const need = all.filter(row => row.needs_fix).length;
    const fixable = all.filter(row => row.fixable).length;
    const q = hook && hook.qemu;
    const any = all.find(row => row.details);
    const v = q && q.verified;
    const item = (id, term, value) => (
        <DescriptionListGroup>
            <DescriptionListTerm>{term}</DescriptionListTerm>
            <DescriptionListDescription id={id}>{value}</DescriptionListDescription>
        </DescriptionListGroup>
    );
    return (
        <Card isCompact>
            <CardHeader actions={{ actions, hasNoOffset: false }}>
                <CardTitle component="h2">{_("Paravirtual spinlocks (kvm-pv-unhalt)")}</CardTitle>
            </CardHeader>
            <CardBody>
                <DescriptionList isHorizontal isCompact>
                    {item("vxc-guests", _("Guests"), String(all.length))}
                    {item("vxc-need", _("Need the fix"), need !== fixable
                        ? cockpit.format(_("$0 ($1 managed by an orchestrator: fix those there)"), need, need - fixable)
                        : String(need))}
                    {item("vxc-qemu", _("QEMU"), !hook ? "…" : q
                        ? `${q.emulator} ${q.version}${q.package ? ` (${q.package})` : ""}` : _("no local QEMU found"))}
                    {item("vxc-build", _("QEMU build"), any
                        ? `${any.details.qemu_build_basis}; ${any.details.qemu_release}` : _("no guest to read it for"))}
                    {item("vxc-hook", _("Hook"), <HookSummary hook={hook} />)}
                    {item("vxc-verified", _("Last verify"), v
                        ? cockpit.format(_("passed $0 ($1 checks, virtxml-cpu $2, build $3)"), v.at, v.checks, v.tool, v.build)
                        : q ? _("never passed on this QEMU build: run verify") : "…")}
                </DescriptionList>
            </CardBody>
        </Card>
    );
}

function Details({ row }) {
    const x = row.details;
    const d = row.decision || {};
    const os = row.guest_os && (row.guest_os.name || row.guest_os.libosinfo_id);
    return (
        <TextContent>
            <Text component="p">{d.reason}</Text>
            {(d.notes || []).map(n => <Text component="p" key={n}>{n}</Text>)}
            {row.stack && <Text component="p" className="vxc-knob">
                {cockpit.format(_("The setting that carries the bit in $0: $1"), row.stack.name, row.stack.knob)}
            </Text>}
            {row.stack_command && <Text component="p" className="vxc-mono">{row.stack_command}</Text>}
            {os && <Text component="p">{cockpit.format(_("Guest OS: $0"), os)}</Text>}
            {x && <Text component="p">
                {cockpit.format(_("QEMU build: $0; $1. Decision $2 (policy $3 from $4)."),
                                x.qemu_build_basis, x.qemu_release, d.rule, x.policy, x.policy_source)}
            </Text>}
            {x && (
                <Table aria-label={_("Per-property table")} variant="compact" className="vxc-props">
                    <Thead>
                        <Tr><Th>{_("Property")}</Th><Th>{_("State")}</Th><Th>{_("Source")}</Th><Th>{_("Reason")}</Th></Tr>
                    </Thead>
                    <Tbody>
                        {Object.keys(x.features).map(p => (
                            <Tr key={p} data-property={p}>
                                <Td className="vxc-mono">{p}</Td>
                                <Td>{PV[x.features[p].state] || x.features[p].state}</Td>
                                <Td className="vxc-mono">{x.features[p].source}</Td>
                                <Td>{x.features[p].detail}</Td>
                            </Tr>
                        ))}
                    </Tbody>
                </Table>
            )}
        </TextContent>
    );
}

function machineText(x) {
    if (!x)
        return "?";
    if (x.machine_resolved && x.machine_resolved !== x.machine)
        return `${x.machine || _("default")} → ${x.machine_resolved}`;
    return x.machine || _("(default)");
}

/* One guest's row and, opened, its details. Memoized: a filter change or one guest's event renders only
 * the rows that changed (200 guests are 200 of these). */
const DomainRows = React.memo(function DomainRows({ row, index, open, onToggle, onFix }) {
    const x = row.details;
    const d = row.decision || {};
    const status = MACHINE[row.machine_status];
    const cpu = x ? x.cpu_mode + (x.cpu_mode === "custom" && x.cpu_model ? ` (${x.cpu_model})` : "") : "?";
    return (
        <Tbody isExpanded={open}>
            <Tr data-domain={row.domain} data-needs-fix={String(!!row.needs_fix)}>
                <Td expand={{ rowIndex: index, isExpanded: open, onToggle: () => onToggle(row.uuid), expandId: "vxc-expand" }}
                    data-action="expand" />
                <Th dataLabel={_("Name")} className="vxc-name" scope="row">{row.domain}</Th>
                <Td dataLabel={_("State")}>{STATES[row.state] || row.state}</Td>
                <Td dataLabel={_("Machine")}>
                    <span className="vxc-mono">{machineText(x)}</span>
                    {status && <> <Tooltip content={x ? x.machine_status_reason : ""}>
                        <span tabIndex={0}><RowLabel color="orange" compact className="vxc-badge">{status}</RowLabel></span>
                    </Tooltip></>}
                </Td>
                <Td dataLabel={_("CPU mode")} className="vxc-mono">{cpu}</Td>
                <Td dataLabel={_("kvm-pv-unhalt")}>
                    {PV[row.pv_unhalt] || row.pv_unhalt}
                    {row.live_pv_unhalt && row.live_pv_unhalt !== row.pv_unhalt &&
                        " " + cockpit.format(_("(running: $0)"), PV[row.live_pv_unhalt] || row.live_pv_unhalt)}
                </Td>
                <Td dataLabel={_("Decision")}>
                    {row.needs_fix
                        ? <RowLabel color="orange">{_("Needs fix")}</RowLabel>
                        : <RowLabel color="green">{_("Kept")}</RowLabel>}
                    {row.needs_fix && row.stack && !row.stack.edits_last && <div>
                        {cockpit.format(_("No fix here: $0 writes this definition again"), row.stack.name)}
                    </div>}
                    {d.rule && <div className="vxc-mono">{d.rule}</div>}
                </Td>
                <Td dataLabel={_("Action")} isActionCell>
                    {row.fixable && <Button variant="secondary" size="sm" data-action="fix" onClick={() => onFix(row.domain)}>
                        {_("Fix at next boot")}
                    </Button>}
                </Td>
            </Tr>
            {open && <Tr isExpanded className="vxc-detail" data-detail-of={row.domain}>
                <Td colSpan={8}><ExpandableRowContent><Details row={row} /></ExpandableRowContent></Td>
            </Tr>}
        </Tbody>
    );
});

function FixDialog({ fix, onClose, onDone }) {
    const [diff, setDiff] = useState(null);
    const [error, setError] = useState(null);
    const [busy, setBusy] = useState(true);
    useEffect(() => {
        run([CMD, "apply", "--diff", "--"].concat(fix.names), LIBVIRT).then(r => {
            setBusy(false);
            if (r.status === 0 || r.status === 1)
                setDiff(r.out);
            else
                setError(commandProblem(r, "apply --diff"));
        });
    }, [fix]);
    const confirm = () => {
        setBusy(true);
        run([CMD, "apply", "--yes", "--"].concat(fix.names), LIBVIRT).then(r => {
            if (r.status === 0)
                return onDone(cockpit.format(cockpit.ngettext(
                    "$0 guest defined again: it gains kvm-pv-unhalt at its next cold boot.",
                    "$0 guests defined again: each gains kvm-pv-unhalt at its next cold boot.", fix.names.length),
                                             fix.names.length));
            setBusy(false);
            setError(commandProblem(r, "apply"));
        });
    };
    return (
        <Modal id="vxc-dialog" isOpen variant={ModalVariant.large} title={fix.title} onClose={onClose}
               footer={<>
                   <Button variant="primary" data-action="confirm" isDisabled={busy || !diff} isLoading={busy && diff !== null}
                           onClick={confirm}>{_("Fix at next boot")}</Button>
                   <Button variant="link" data-action="cancel" onClick={onClose}>{_("Cancel")}</Button>
               </>}>
            <TextContent>
                <Text component="p">{_("The persistent definition changes now. A running guest keeps its CPU until its next cold boot (shut it down, then start it; a reboot from inside the guest is not enough): it gains kvm-pv-unhalt then.")}</Text>
            </TextContent>
            {diff === null && !error && <Spinner size="md" aria-label={_("Reading what apply would change…")} />}
            {diff !== null && <CodeBlock className="vxc-diff"><CodeBlockCode id="vxc-dialog-diff">{diff || _("(no change)")}</CodeBlockCode></CodeBlock>}
            {error && <Alert id="vxc-dialog-error" variant="danger" isInline isPlain title={error} />}
        </Modal>
    );
}

function Verify({ onDone }) {
    const [state, setState] = useState({ phase: "running", progress: _("Starting QEMU for every machine type…"), report: null, line: "" });
    useEffect(() => {
        let text = "";
        const proc = cockpit.spawn([CMD, "verify", "--json", "-"], { err: "out", superuser: "try" });
        proc.stream(chunk => {
            text += chunk;
            const lines = text.split("\n").filter(l => l.trim() && l[0] !== "{");
            if (lines.length)
                setState(s => ({ ...s, progress: lines[lines.length - 1] }));
        });
        const done = ex => {
            const json = text.split("\n").filter(l => l.trim()[0] === "{").pop();
            let report = null;
            try {
                report = json ? JSON.parse(json) : null;
            } catch (e) {
                report = null;
            }
            if (report)
                setState({ phase: report.summary.disagreements ? "disagree" : "pass", report, progress: "" });
            else
                setState({ phase: "error", progress: "", line: commandProblem({ status: ex ? ex.exit_status : 0, problem: ex && ex.problem, err: text }, "verify") });
            onDone();
        };
        proc.then(() => done(null), ex => done(ex));
        return () => proc.close("cancelled");
    }, [onDone]);
    const r = state.report;
    return (
        <div id="vxc-verify-box" data-state={state.phase}>
            {state.phase === "running" && <Flex><FlexItem><Spinner size="md" aria-label={_("verify runs")} /></FlexItem>
                <FlexItem id="vxc-verify-progress">{state.progress}</FlexItem></Flex>}
            <p id="vxc-verify-result" data-verify-result>
                {r ? cockpit.format(_("verify: $0 checks, $1 disagreements"), r.summary.checks, r.summary.disagreements) : state.line}
            </p>
            <List id="vxc-verify-disagreements">
                {r && r.disagreements.map((d, i) => <ListItem key={i}>
                    {cockpit.format(_("$0 $1 $2: QEMU $3, this tool $4 ($5: $6)"), d.machine, d.model, d.prop, d.qemu, d.tool, d.source, d.reason)}
                </ListItem>)}
            </List>
        </div>
    );
}

export function App() {
    const host = useHost();
    const [filter, setFilter] = useState("needs-fix");
    const [expanded, setExpanded] = useState({});
    const [fix, setFix] = useState(null);
    const [result, setResult] = useState(null);
    const [verifying, setVerifying] = useState(0);
    const [verifyDone, setVerifyDone] = useState(true);

    const restart = host.restart;
    const onAccess = useCallback(() => { setFix(null); setResult(null); restart() }, [restart]);
    useSuperuserChange(onAccess);

    useEffect(() => {
        if (host.loaded) {
            performance.mark("vxc-rendered");
            document.body.setAttribute("data-loaded", "true");
        }
    }, [host.loaded]);

    const rows = useMemo(() => [...host.rows.values()], [host.rows]);
    const position = useMemo(() => new Map(rows.map((row, i) => [row.uuid, i])), [rows]);
    const toggle = useCallback(uuid => setExpanded(e => ({ ...e, [uuid]: !e[uuid] })), []);
    const fixOne = useCallback(name => setFix({ names: [name], title: cockpit.format(_("Fix $0 at next boot"), name) }), []);
    const shown = rows.filter(row => filter === "all" || row.needs_fix);
    const fixable = rows.filter(row => row.fixable).map(row => row.domain);
    const readHook = host.readHook;
    const verified = useCallback(() => { setVerifyDone(true); readHook() }, [readHook]);

    const actions = (
        <Flex>
            <Button variant="secondary" data-action="verify" isDisabled={!verifyDone}
                    onClick={() => { setVerifyDone(false); setVerifying(v => v + 1) }}>{_("Run verify")}</Button>
            <Button variant="primary" data-action="fix-all" isDisabled={!fixable.length}
                    onClick={() => setFix({
                        names: fixable,
                        title: cockpit.format(cockpit.ngettext("Fix $0 guest at next boot", "Fix $0 guests at next boot",
                                                               fixable.length), fixable.length),
                    })}>
                {_("Fix all that need it")}
            </Button>
        </Flex>
    );

    return (
        <Page>
            <PageSection>
                {host.error && <Alert id="vxc-error" variant="danger" isInline title={host.error} />}
                <Summary rows={host.rows} hook={host.hook} actions={actions} />
                {verifying > 0 && <Verify key={verifying} onDone={verified} />}
                {result && <Alert id="vxc-action-result" variant="success" isInline isPlain title={result} />}
            </PageSection>
            <PageSection>
                <Card isCompact>
                    <CardHeader>
                        <CardTitle component="h2">{_("Guests")}</CardTitle>
                    </CardHeader>
                    <CardBody>
                        <Toolbar>
                            <ToolbarContent>
                                <ToolbarItem>
                                    <ToggleGroup aria-label={_("Filter")}>
                                        <ToggleGroupItem text={_("Needs fix")} buttonId="vxc-filter-needs-fix" data-filter="needs-fix"
                                                         isSelected={filter === "needs-fix"} onChange={() => setFilter("needs-fix")} />
                                        <ToggleGroupItem text={_("All")} buttonId="vxc-filter-all" data-filter="all"
                                                         isSelected={filter === "all"} onChange={() => setFilter("all")} />
                                    </ToggleGroup>
                                </ToolbarItem>
                            </ToolbarContent>
                        </Toolbar>
                        {!host.loaded && <EmptyState><Spinner size="lg" aria-label={_("Reading the guests’ definitions…")} />
                            <EmptyStateBody>{_("Reading the guests’ definitions…")}</EmptyStateBody></EmptyState>}
                        {host.loaded && !host.error && !shown.length && <EmptyState><EmptyStateBody id="vxc-empty">
                            {rows.length ? _("No guest needs the fix. Choose “All” to see every guest.") : _("No guests are defined on this host.")}
                        </EmptyStateBody></EmptyState>}
                        {shown.length > 0 && (
                            <Table id="vxc-table" aria-label={_("Guests")} variant="compact">
                                <Thead>
                                    <Tr>
                                        <Th screenReaderText={_("Details")} />
                                        <Th>{_("Name")}</Th>
                                        <Th>{_("State")}</Th>
                                        <Th>{_("Machine")}</Th>
                                        <Th>{_("CPU mode")}</Th>
                                        <Th modifier="nowrap" info={{ tooltip: _("in the persistent definition") }}>{_("kvm-pv-unhalt")}</Th>
                                        <Th>{_("Decision")}</Th>
                                        <Th screenReaderText={_("Action")} />
                                    </Tr>
                                </Thead>
                                {shown.map(row => (
                                    <DomainRows key={row.uuid} row={row} index={position.get(row.uuid)} open={!!expanded[row.uuid]}
                                                onToggle={toggle} onFix={fixOne} />
                                ))}
                            </Table>
                        )}
                    </CardBody>
                </Card>
            </PageSection>
            {fix && <FixDialog fix={fix} onClose={() => setFix(null)}
                               onDone={line => { setFix(null); setResult(line) }} />}
        </Page>
    );
}
