"""How fast `elfpatch inits --json` is next to readelf listing the relocations.

    python benchmarks/inits.py [--runs N] [--warmup N] LIB...

For each library, times side by side (alternating, N rounds after a warm-up
round): `elfpatch inits --json LIB`, which resolves every initializer slot
through the relocations and reads each initializer's machine code, and
`readelf -W -r LIB`, which only lists the relocations, both writing to
/dev/null.  Prints the median, min and max wall time, the ratio against
readelf and each command's peak resident memory.  The target:
inits --json takes less time than readelf -W -r.
"""

from __future__ import annotations

import argparse
import shutil
import sys
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

OURS = "elfpatch inits --json"
BASELINE = "readelf -W -r"
TARGET = "inits --json takes less time than readelf -W -r"


def commands_for(library: str, python: str) -> list[Command]:
    return [Command(OURS, elfpatch_argv(python, "inits", "--json", library)),
            Command(BASELINE, ("readelf", "-W", "-r", library))]


def benchmark(library: str, options: argparse.Namespace) -> None:
    results = alternate(commands_for(library, options.python), options.runs, options.warmup)
    print(table(results, BASELINE))
    ours, reference = by_name(results, OURS), by_name(results, BASELINE)
    print(verdict_line(ours, reference, TARGET, met=ours.ratio_to(reference) < 1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("libraries", nargs="+", metavar="LIB")
    timing_options(parser, "the interpreter with elfpatch installed")
    options = parser.parse_args(argv)
    if shutil.which("readelf") is None:
        parser.error("readelf is not installed, and it is what elfpatch is measured against")
    compile_bytecode(options.python)
    return each_input(options.libraries, options.runs,
                      lambda library: benchmark(library, options))


if __name__ == "__main__":
    sys.exit(main())
