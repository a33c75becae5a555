"""How fast `elfpatch fix -w` and `elfpatch check` are on a wheel, next to unzipping its libraries.

    python benchmarks/wheel_fix.py [--runs N] [--warmup N] [--members GLOB]
                                   [--install [--no-deps] [--run CODE]] WHEEL

Times side by side (alternating, N rounds after a warm-up round, medians):
`elfpatch fix -q WHEEL -w OUT`, `elfpatch check --format json WHEEL` (the
default policy: its exit status 1 is a normal outcome) and
`unzip -p WHEEL 'GLOB' > /dev/null`, the floor for any tool that reads the
wheel's libraries (GLOB: `*.so*`; the PyTorch figures in the README use
`torch/lib/*.so*`).  OUT is a folder under the system's temporary folder,
removed at the end; each run replaces the wheel in it.  Prints the median,
min and max wall time, the ratio against unzip and each command's peak
resident memory.  The targets: fix -w within 1.5x of unzip under 700 MiB,
check within 1.0x.

Then the repaired wheel is checked as a user would: `elfpatch check`
passes, and every member matches RECORD as the `wheel` package's WheelFile
(an independent reader) checks it; its size is compared with the input's.
With `--install`, pip installs it into a new virtual environment (with its
dependencies from the configured index, unless `--no-deps`) and that
environment's Python runs CODE (`--run`), from an empty folder.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Command,
    alternate,
    by_name,
    compile_bytecode,
    each_input,
    elfpatch_argv,
    table,
    timing_options,
    verdict_line,
)

FIX_TARGET_RATIO = 1.5
FIX_TARGET_RSS_MIB = 700
CHECK_TARGET_RATIO = 1.0
# check: 0 the policy passed, 1 it was violated; unzip: 1 means it warned.
ACCEPTED_EXIT_CODES = (0, 1)
TORCH_SMOKE = "import torch; print(torch.randn(3) @ torch.randn(3))"


def commands(wheel: str, options: argparse.Namespace, out: Path,
             policy: Path) -> tuple[Command, Command, Command]:
    fix = Command("elfpatch fix -w", elfpatch_argv(options.python, "fix", "-q", wheel, "-w",
                                                   str(out)))
    check = Command("elfpatch check --format json",
                    elfpatch_argv(options.python, "check", "--format", "json", "--config",
                                  str(policy), wheel))
    unzip = Command(f"unzip -p WHEEL {shlex.quote(options.members)}",
                    ("sh", "-c", f"unzip -p {shlex.quote(wheel)} {shlex.quote(options.members)} "
                     "> /dev/null"))
    return fix, check, unzip


def benchmark(wheel: str, options: argparse.Namespace, folder: Path) -> None:
    out = folder / "out"
    policy = folder / "default-policy.toml"
    policy.write_text("")
    fix, check, unzip = commands(wheel, options, out, policy)
    results = alternate([fix, check, unzip], options.runs, options.warmup, ACCEPTED_EXIT_CODES)
    print(table(results, unzip.name))
    reference = by_name(results, unzip.name)
    fixed, checked = by_name(results, fix.name), by_name(results, check.name)
    fix_met = fixed.ratio_to(reference) <= FIX_TARGET_RATIO and \
        fixed.peak_rss_mib < FIX_TARGET_RSS_MIB
    print(verdict_line(fixed, reference, f"within {FIX_TARGET_RATIO:g}x of unzip -p, under "
                       f"{FIX_TARGET_RSS_MIB} MiB", fix_met))
    print(verdict_line(checked, reference, f"within {CHECK_TARGET_RATIO:g}x of unzip -p",
                       checked.ratio_to(reference) <= CHECK_TARGET_RATIO))
    repaired = out / Path(wheel).name
    examine(Path(wheel), repaired, options, policy, folder)


def examine(original: Path, repaired: Path, options: argparse.Namespace, policy: Path,
            folder: Path) -> None:
    """The repaired wheel as its users meet it."""
    change = (repaired.stat().st_size - original.stat().st_size) / original.stat().st_size
    print(f"repaired wheel: {repaired.stat().st_size / 1e6:,.1f} MB ({change:+.2%} against "
          f"the input)")
    gate = subprocess.run(elfpatch_argv(options.python, "check", "--config", str(policy),
                                        str(repaired)), capture_output=True, text=True)
    print(f"elfpatch check of the repaired wheel: exit {gate.returncode} "
          f"({'passed' if gate.returncode == 0 else 'FAILED'})")
    print(f"RECORD against the content (wheel.wheelfile.WheelFile): {record_verdict(repaired)}")
    if options.install:
        print(install_and_run(repaired, options, folder))


def record_verdict(repaired: Path) -> str:
    try:
        from wheel.wheelfile import WheelFile
    except ImportError:
        return "not checked (the wheel package is not installed)"
    try:
        with WheelFile(repaired) as checked:
            for name in checked.namelist():
                with checked.open(name) as member:  # WheelFile checks the hash as it reads
                    while member.read(1 << 24):
                        pass
            count = len(checked.namelist())
    except Exception as error:  # WheelFile raises several kinds for a mismatch
        return f"MISMATCH: {error}"
    return f"every one of the {count:,} members matches"


def install_and_run(repaired: Path, options: argparse.Namespace, folder: Path) -> str:
    """pip install the wheel into a new venv and run ``options.run`` there."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    start = time.perf_counter()
    install = subprocess.run([str(python), "-m", "pip", "install", "-q",
                              *(["--no-deps"] if options.no_deps else []), str(repaired)],
                             capture_output=True, text=True)
    if install.returncode != 0:
        return f"pip install: FAILED: {install.stderr.strip()[-800:]}"
    took = time.perf_counter() - start
    empty = folder / "empty"
    empty.mkdir(exist_ok=True)
    run = subprocess.run([str(python), "-c", options.run], capture_output=True, text=True,
                         cwd=empty)
    outcome = run.stdout.strip() if run.returncode == 0 else \
        f"FAILED: {run.stderr.strip()[-800:]}"
    return f"pip install: ok ({took:.0f} s); python -c {options.run!r}: {outcome}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", metavar="WHEEL")
    timing_options(parser, "the interpreter with elfpatch installed")
    parser.set_defaults(runs=3)
    parser.add_argument("--members", default="*.so*",
                        help="what unzip -p extracts (default '*.so*')")
    parser.add_argument("--install", action="store_true",
                        help="pip install the repaired wheel into a new venv and run --run")
    parser.add_argument("--no-deps", action="store_true", help="pip install --no-deps")
    parser.add_argument("--run", default=TORCH_SMOKE,
                        help=f"Python code run in that venv (default: {TORCH_SMOKE!r})")
    options = parser.parse_args(argv)
    if shutil.which("unzip") is None:
        parser.error("unzip is not installed, and it is what elfpatch is measured against")
    compile_bytecode(options.python)
    with tempfile.TemporaryDirectory(prefix="elfpatch-bench-") as folder:
        return each_input(options.wheels, options.runs,
                          lambda wheel: benchmark(wheel, options, Path(folder)))


if __name__ == "__main__":
    sys.exit(main())
