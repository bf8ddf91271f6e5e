"""Benches the performance page quotes run as it shows them (small sizes) and print every figure."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support import ROOT


def needs_libvirt():
    pytest.importorskip("libvirt")


def test_audit_parts_prints_each_start_up_step_and_each_domain_step():
    needs_libvirt()
    r = subprocess.run([sys.executable, "bench/audit_parts.py", "-n", "30", "-r", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    figures = dict(re.findall(r"^  (\S.*?)\s+(\d+\.\d)$", r.stdout, flags=re.M))
    assert len(figures) == 16, r.stdout
    assert float(figures["beyond the floor (all after libvirt)"]) > 0
    assert float(figures["audit_connection (a host, whole)"]) > float(figures["domain.extract (the facts)"]) > 0


def test_audit_processes_reports_a_ratio_per_size():
    needs_libvirt()
    r = subprocess.run([sys.executable, "bench/audit_processes.py", "-n", "20", "-r", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^20 domains, 1 rounds: floor [\d.]+ s wall", r.stdout, flags=re.M), r.stdout
    assert re.search(r"audit [\d.]+ s wall = [\d.]+x .*target 1.3x$", r.stdout, flags=re.M), r.stdout


def test_memo_warm_reports_the_floor_and_the_warm_decision():
    r = subprocess.run([sys.executable, "bench/memo_warm.py", "-n", "2", "-r", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^floor \(lean parse \+ facts\): [\d.]+ us per document$", r.stdout, flags=re.M), r.stdout
    assert re.search(r"^warm decide \+ JSON line: +[\d.]+ us per document = [\d.]+x the floor", r.stdout,
                     flags=re.M), r.stdout
