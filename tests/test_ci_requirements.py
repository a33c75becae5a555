"""Every skip names the package that removes it, and CI accepts only the allow-listed ones.

The rules live in ``conftest.py`` (``ALLOWED_SKIPS``, ``skip_problem``); here a
throwaway suite is run under them with and without ``ELFPATCH_REQUIRE_TOOLS``,
and parts of the real suite are run on a PATH without qemu-user or without
the cross compilers, where they must skip and say which package to install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ALLOWED_SKIPS, REQUIRE_TOOLS, SLOW_TESTS

TESTS_DIR = Path(__file__).resolve().parent

TESTS = '''
import pytest
from support.tools import require_module
def test_names_its_package():
    pytest.skip("qemu-aarch64 is not installed (apt-get install qemu-user)")
def test_names_no_package(): pytest.skip("qemu-aarch64 is not installed")
def test_opt_in(): pytest.skip("set ELFPATCH_TORCH_WHEEL to a wheel to run this")
def test_as_root(): pytest.skip("running as root: file permissions do not stop reads")
def test_needs_a_module(): require_module("no_such_module_here", "no-such-package")
@pytest.mark.xfail(reason="known")
def test_expected_to_fail(): assert False
'''


def run_pytest(arguments: list[str], environment: dict[str, str],
               cwd: Path) -> subprocess.CompletedProcess[str]:
    """pytest in a new process; outside this folder, with its conftest loaded as a plugin."""
    plugin = [] if cwd == TESTS_DIR.parent else ["-p", "conftest"]
    environment = {**environment, "PYTHONPATH": os.pathsep.join(
        [str(TESTS_DIR), *filter(None, [environment.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "pytest", *plugin, "-q", "-rs",
                           "-p", "no:cacheprovider", *arguments], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=900)


def outcomes(tmp_path: Path, required: bool) -> dict[str, str]:
    (tmp_path / "test_tools.py").write_text(TESTS)
    environment = {k: v for k, v in os.environ.items() if k != REQUIRE_TOOLS}
    if required:
        environment[REQUIRE_TOOLS] = "1"
    run = run_pytest(["-vv", str(tmp_path / "test_tools.py")], environment, tmp_path)
    found = re.findall(r"::test_(\w+) (PASSED|FAILED|SKIPPED|XFAIL|ERROR)", run.stdout)
    return dict(found)


def test_a_skip_must_name_its_package(tmp_path: Path) -> None:
    assert outcomes(tmp_path, required=False) == {
        "names_its_package": "SKIPPED", "names_no_package": "FAILED", "opt_in": "SKIPPED",
        "as_root": "SKIPPED", "needs_a_module": "SKIPPED", "expected_to_fail": "XFAIL"}


def test_when_required_only_allow_listed_skips_stand(tmp_path: Path) -> None:
    assert outcomes(tmp_path, required=True) == {
        "names_its_package": "FAILED", "names_no_package": "FAILED", "opt_in": "SKIPPED",
        "as_root": "SKIPPED", "needs_a_module": "FAILED", "expected_to_fail": "XFAIL"}


def test_the_allow_list_is_short_and_says_why() -> None:
    assert len(ALLOWED_SKIPS) <= 5
    assert all(len(why.split()) >= 8 for why in ALLOWED_SKIPS.values())


# -- the real suite on a machine that lacks tools -------------------------------------

def path_without(tmp_path: Path, leave_out: re.Pattern[str]) -> str:
    """A PATH holding every program of today's PATH except those ``leave_out`` matches."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for program in Path(directory).glob("*") if Path(directory).is_dir() else []:
            target = folder / program.name
            if not leave_out.match(program.name) and not target.exists():
                target.symlink_to(program)
    return str(folder)


def skips_without(tmp_path: Path, leave_out: str, selection: list[str]) -> tuple[str, str]:
    """(the summary line, the skip reasons) of ``selection`` run without some programs."""
    environment = {k: v for k, v in os.environ.items() if k != REQUIRE_TOOLS}
    environment["PATH"] = path_without(tmp_path, re.compile(leave_out))
    run = run_pytest(selection, environment, TESTS_DIR.parent)
    lines = run.stdout.strip().splitlines()
    return lines[-1], "\n".join(line for line in lines if line.startswith("SKIPPED"))


@pytest.mark.slow
def test_without_qemu_the_cross_programs_skip_and_name_qemu_user(tmp_path: Path) -> None:
    if shutil.which("qemu-aarch64") is None:
        pytest.skip("qemu-aarch64 is not installed (apt-get install qemu-user)")
    summary, skips = skips_without(tmp_path, r"qemu-", [
        "tests/test_inits_order.py", "tests/test_inits_lto.py", "tests/test_fix_runtime.py",
        "-k", "aarch64 and not O0 and not Os"])
    assert "failed" not in summary and "error" not in summary and "skipped" in summary
    assert skips and all("(apt-get install qemu-user)" in line for line in skips.splitlines())


@pytest.mark.slow
def test_without_cross_compilers_their_tests_skip_and_name_them(tmp_path: Path) -> None:
    if shutil.which("aarch64-linux-gnu-g++") is None:
        pytest.skip("aarch64-linux-gnu-g++ is not installed (apt-get install "
                    "g++-aarch64-linux-gnu)")
    summary, skips = skips_without(tmp_path, r"(aarch64|s390x|i686|powerpc64)-linux-gnu-|qemu-", [
        "tests/test_scan.py", "tests/test_effects.py", "tests/test_inits_lto.py",
        "tests/test_fixtures.py", "-k", "aarch64 or s390x or bigendian or 32bit or arm"])
    assert "failed" not in summary and "error" not in summary and "skipped" in summary
    assert skips and all(re.search(r"\(apt-get install g\+\+-(aarch64|s390x|i686)-linux-gnu\)",
                                   line) for line in skips.splitlines()), skips


def test_every_slow_entry_names_tests() -> None:
    """A renamed test must not leave the fast tier through a stale SLOW_TESTS entry."""
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "-m", "slow"], cwd=TESTS_DIR.parent,
                         capture_output=True, text=True, timeout=600)
    collected = [line for line in run.stdout.splitlines() if "::" in line]
    assert collected, run.stdout + run.stderr
    assert [entry for entry in SLOW_TESTS
            if not any(node.startswith(entry) for node in collected)] == []
