"""Fixtures of the package tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import ROOT
from virtxml_cpu import __version__


@pytest.fixture(scope="session")
def deb_file(request) -> Path:
    left = ROOT / f"virtxml-cpu_{__version__}_all.deb"
    if not os.environ.get("VIRTXML_CPU_DEB") and left.is_file():
        return left
    if not os.environ.get("VIRTXML_CPU_DEB") and os.geteuid() != 0:
        pytest.skip("RPM/DEB PAYLOAD COMPARISON SKIPPED LOUDLY: no .deb (VIRTXML_CPU_DEB unset, none in the "
                    "tree) and not root to build one with `make deb`")
    return request.getfixturevalue("deb")
