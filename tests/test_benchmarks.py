"""The benchmark scripts run end to end on small inputs and print their table and verdict.

Each script runs once (one timed round, no warm-up) as a user runs it, on
the fix tests' library or on a wheel holding it, built here.  These tests
check that the scripts work; the timings they print mean nothing at this
size and are not looked at.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.build import make_wheel, require_tool
from support.fixlib import VARIANTS, built_library
from support.zipcraft import record_hash

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
ONE_ROUND = ("--runs", "1", "--warmup", "0")
TABLE_HEADER = re.compile(r"^command +median s +vs .+ +min s +max s +peak RSS MiB$", re.MULTILINE)


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


@pytest.fixture
def wheel(library: Path, tmp_path: Path) -> Path:
    return make_wheel(tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl",
                      {"pkg/libfixme.so": library.read_bytes()})


def run_script(script: str, *arguments: str | Path) -> subprocess.CompletedProcess[str]:
    """One timed round of ``script``, as a user runs it."""
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *ONE_ROUND,
                           *map(str, arguments)], capture_output=True, text=True, timeout=300)


def run_benchmark(script: str, *arguments: str | Path) -> str:
    """The script's output, after checking it exited 0 and printed a timing table."""
    result = run_script(script, *arguments)
    assert result.returncode == 0, result.stderr
    assert TABLE_HEADER.search(result.stdout), result.stdout
    return result.stdout


def require_module(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"the Python package {name} is not installed (pip install {name})")


def test_scan_benchmark(library: Path) -> None:
    require_module("elftools")
    require_module("lief")
    output = run_benchmark("scan.py", library)
    assert re.search(r"^UNIQUE in \.dynsym: elfpatch \d+", output, re.MULTILINE), output
    assert re.search(r"^elfpatch: .*peak RSS \d+ MiB", output, re.MULTILINE), output


def test_fix_benchmark(library: Path, tmp_path: Path) -> None:
    # No disk sync between runs: it would only slow down whatever else the machine runs.
    output = run_benchmark("fix.py", "--lief-runs", "0", "--no-sync", "--work-dir", tmp_path,
                           library)
    for mode in ("local", "weak-hidden", "global"):
        assert re.search(rf"^elfpatch --to {mode}: [\d.]+x cp", output, re.MULTILINE), output
    assert list(tmp_path.iterdir()) == []  # the temporary output is gone


def test_inits_benchmark(library: Path) -> None:
    require_tool("readelf")
    output = run_benchmark("inits.py", library)
    assert re.search(r'^elfpatch inits --json: [\d.]+x readelf -W -r, peak RSS \d+ MiB; '
                     r'target "inits --json within 3x readelf -W -r": (met|MISSED)$',
                     output, re.MULTILINE), output
    assert re.search(r'^inits --json, machine code not read: [\d.]+x readelf -W -r, peak RSS '
                     r'\d+ MiB; target "inits --json --list-only within 1.0x readelf -W -r": '
                     r'(met|MISSED)$', output, re.MULTILINE), output


def test_inits_benchmark_phases(library: Path) -> None:
    require_tool("readelf")
    output = run_benchmark("inits.py", "--phases", library)
    assert re.search(r"^inits --json, machine code not read +[\d.]+ +[\d.]+x", output,
                     re.MULTILINE), output
    header = re.search(r"^CPU seconds per step, in this process, medians of 1 \(([\d,]+) "
                       r"functions followed; ([\d,]+) instructions", output, re.MULTILINE)
    assert header is not None, output
    functions, instructions = (int(n.replace(",", "")) for n in header.groups())
    assert 0 < functions < instructions, output
    for step in ("listing the initializers", "address index",
                 r"following every initializer \(decoding included\)",
                 r"decoding the same code alone \(capstone's Python binding\)"):
        assert re.search(rf"^  {step} +\d+\.\d{{3}}$", output, re.MULTILINE), (step, output)


@pytest.mark.parametrize("jobs", [(), ("-j", "2")], ids=["default-jobs", "two-jobs"])
def test_check_benchmark(wheel: Path, jobs: tuple[str, ...]) -> None:
    # The library defines UNIQUE symbols, so check exits 1: the benchmark accepts it.
    require_tool("unzip")
    output = run_benchmark("check.py", *jobs, wheel)
    name = " ".join(("elfpatch check --format json", *jobs))
    assert re.search(rf"^{re.escape(name)}: [\d.]+x unzip -p WHEEL '\*\.so\*', peak RSS \d+ MiB; "
                     r'target "within 1.5x of unzip -p": (met|MISSED)$', output, re.MULTILINE), \
        output


def test_check_benchmark_fails_when_check_cannot_read_the_wheel(library: Path,
                                                                tmp_path: Path) -> None:
    require_tool("unzip")
    not_a_wheel = make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl",
                             {"pkg/libfixme.so": library.read_bytes()}, with_metadata=False)
    result = run_script("check.py", not_a_wheel)
    assert result.returncode == 1
    assert "elfpatch check --format json exited 2" in result.stderr, result.stderr


def test_loader_benchmark(library: Path) -> None:
    require_tool("readelf")
    output = run_benchmark("loader.py", "--host", "c", library)
    assert re.search(r'^elfpatch scan --json \(with the verdict\): [\d.]+x readelf -W -r, peak '
                     r'RSS \d+ MiB; target "scan with the verdict within 2x readelf -W -r": '
                     r'(met|MISSED)$', output, re.MULTILINE), output


def test_unload_probe_agrees_on_a_library_and_a_wheel(library: Path, wheel: Path) -> None:
    """The probe runs the real loader on each library and prints the agreement."""
    require_tool("gcc")
    for host in ("c", "python"):
        result = subprocess.run([sys.executable, str(BENCHMARKS / "unload_probe.py"), "--host",
                                 host, "--json", str(library), str(wheel)],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        records = [json.loads(line) for line in result.stdout.splitlines()]
        assert len(records) == 2 and all(r["agree"] for r in records), records
        assert all(r["unloaded"] is False for r in records)  # the library's UNIQUE symbols
        assert "agreement on the libraries that load: 2/2 (100.0%)" in result.stderr


def test_unload_stages_probe_a_wheel_before_and_after_the_fix(library: Path,
                                                              tmp_path: Path) -> None:
    """Before the fix the library stays (its UNIQUE symbols), after fix -w it unloads."""
    require_tool("gcc")
    members = {"pkg/libfixme.so": library.read_bytes(),
               "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\n"}
    wheel = tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("pkg-1.0.dist-info/RECORD", "".join(
            f"{name},{record_hash(data)},{len(data)}\n" for name, data in members.items())
            + "pkg-1.0.dist-info/RECORD,,\n")
    result = subprocess.run([sys.executable, str(BENCHMARKS / "unload_stages.py"), "--host",
                             "c", str(wheel)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = {tuple(line.split(" | ")[1:2]): line for line in result.stdout.splitlines()
            if line.startswith("all | ")}
    assert rows[("before",)].endswith("| 1 | 1 | 1 (100.0%) | 1"), result.stdout
    assert rows[("fix -w",)].endswith("| 1 | 1 | 1 (100.0%) | 0"), result.stdout
    assert "lets 1 of the 1 libraries pinned before the fix unload (100.0%)" in result.stdout
