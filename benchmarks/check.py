"""How fast `elfpatch check --format json` is next to merely decompressing the wheel's libraries.

    python benchmarks/check.py [--runs N] [--warmup N] [-j N] WHEEL...

For each wheel, times side by side (alternating, N rounds after a warm-up
round): `elfpatch check --format json WHEEL` and
`unzip -p WHEEL '*.so*' > /dev/null` (run through `sh -c`), the floor any
tool that reads every library in the wheel has to pay.  `-j N` is passed on
to check.  check runs with the default policy, whatever pyproject.toml is
near the current folder, so that every run does the same work.  Its exit
status 1 (the policy was violated) is a normal outcome; 2 fails the
benchmark.

Prints the median, min and max wall time, the ratio against unzip and each
command's peak resident memory.  check analyses the libraries in worker
processes: the peak RSS is that of the largest single process (the workers
are waited for, so their peaks count), not the sum over the workers running
at the same time.  The target: within 1.5x of unzip -p.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
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

BASELINE = "unzip -p WHEEL '*.so*'"
TARGET_RATIO = 1.5
TARGET = f"within {TARGET_RATIO:g}x of unzip -p"
# check: 0 the policy passed, 1 it was violated.  unzip: 1 means it warned but
# extracted everything.  2 and above are failures for both.
ACCEPTED_EXIT_CODES = (0, 1)


def check_command(wheel: str, python: str, policy: Path, jobs: int | None) -> Command:
    jobs_arguments = ("-j", str(jobs)) if jobs else ()
    name = " ".join(("elfpatch check --format json", *jobs_arguments))
    return Command(name, elfpatch_argv(python, "check", "--format", "json", "--config",
                                       str(policy), *jobs_arguments, wheel))


def unzip_command(wheel: str) -> Command:
    return Command(BASELINE, ("sh", "-c", f"unzip -p {shlex.quote(wheel)} '*.so*' > /dev/null"))


def benchmark(wheel: str, options: argparse.Namespace, policy: Path) -> None:
    ours = check_command(wheel, options.python, policy, options.jobs)
    results = alternate([ours, unzip_command(wheel)], options.runs, options.warmup,
                        ACCEPTED_EXIT_CODES)
    print(table(results, BASELINE))
    measured, reference = by_name(results, ours.name), by_name(results, BASELINE)
    met = measured.ratio_to(reference) <= TARGET_RATIO
    print(verdict_line(measured, reference, TARGET, met) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", metavar="WHEEL")
    timing_options(parser, "the interpreter with elfpatch installed")
    parser.add_argument("-j", "--jobs", type=int, default=None,
                        help="passed on to check (default: check's own)")
    options = parser.parse_args(argv)
    if shutil.which("unzip") is None:
        parser.error("unzip is not installed, and it is what elfpatch is measured against")
    compile_bytecode(options.python)
    with tempfile.TemporaryDirectory(prefix="elfpatch-bench-") as folder:
        # An empty policy file: the defaults, not the policy of a pyproject.toml nearby.
        policy = Path(folder) / "default-policy.toml"
        policy.write_text("")
        return each_input(options.wheels, options.runs,
                          lambda wheel: benchmark(wheel, options, policy))


if __name__ == "__main__":
    sys.exit(main())
