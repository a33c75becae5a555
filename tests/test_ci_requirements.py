"""CI proves every oracle ran: with ELFPATCH_REQUIRE_TOOLS set, a missing tool fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REQUIRE_TOOLS

TESTS = '''
import pytest
def test_needs_an_emulator(): pytest.skip("qemu-aarch64 is not installed")
def test_needs_a_cross_compiler(): pytest.skip("no s390x cross compiler installed")
def test_opt_in(): pytest.skip("set ELFPATCH_TORCH_WHEEL to a wheel to run this")
'''


def run_suite(folder: Path, required: bool) -> str:
    shutil.copy(Path(__file__).with_name("conftest.py"), folder / "conftest.py")
    (folder / "test_tools.py").write_text(TESTS)
    environment = {k: v for k, v in os.environ.items() if k != REQUIRE_TOOLS}
    if required:
        environment[REQUIRE_TOOLS] = "1"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(folder)], cwd=folder, env=environment, capture_output=True,
                         text=True, timeout=120)
    return run.stdout.strip().splitlines()[-1]


def test_missing_tools_fail_when_required(tmp_path: Path) -> None:
    last = run_suite(tmp_path, required=True)
    assert "2 failed" in last and "1 skipped" in last


def test_missing_tools_skip_otherwise(tmp_path: Path) -> None:
    last = run_suite(tmp_path, required=False)
    assert "3 skipped" in last and "failed" not in last
