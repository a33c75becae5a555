"""How fast the load and unload verdict is next to readelf listing the relocations.

    python benchmarks/loader.py [--runs N] [--warmup N] [--host python|c|c++] LIB...

For each library, times side by side (alternating, N rounds after a warm-up
round): `elfpatch scan --json --host HOST LIB`, which scans the library and
then models its dlopen and dlclose in the host (the library's closure
found, every object's exports and load-time relocations read, every symbol
bound, the UNIQUE table and the pins followed); `elfpatch scan --json
--no-loader LIB`, the scan alone; `readelf -W -r LIB`, which only lists the
library's relocations; and `readelf --dyn-syms -W LIB`.  The targets: the
scan with the verdict within 2x readelf -W -r, the scan alone within 1.0x
readelf --dyn-syms -W.
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

WITH_LOADER = "elfpatch scan --json (with the verdict)"
SCAN_ONLY = "elfpatch scan --json --no-loader"
RELOCATIONS = "readelf -W -r"
SYMBOLS = "readelf --dyn-syms -W"
RATIO = 2.0
TARGET = f"scan with the verdict within {RATIO:g}x readelf -W -r"
SCAN_RATIO = 1.0
SCAN_TARGET = f"scan alone within {SCAN_RATIO:.1f}x readelf --dyn-syms -W"


def commands_for(library: str, options: argparse.Namespace) -> list[Command]:
    python = options.python
    return [Command(WITH_LOADER, elfpatch_argv(python, "scan", "--json", "--host",
                                               options.host, library)),
            Command(SCAN_ONLY, elfpatch_argv(python, "scan", "--json", "--no-loader", library)),
            Command(RELOCATIONS, ("readelf", "-W", "-r", library)),
            Command(SYMBOLS, ("readelf", "--dyn-syms", "-W", library))]


def benchmark(library: str, options: argparse.Namespace) -> None:
    results = alternate(commands_for(library, options), options.runs, options.warmup)
    print(table(results, RELOCATIONS))
    ours, reference = by_name(results, WITH_LOADER), by_name(results, RELOCATIONS)
    print(verdict_line(ours, reference, TARGET, met=ours.ratio_to(reference) <= RATIO))
    alone, symbols = by_name(results, SCAN_ONLY), by_name(results, SYMBOLS)
    print(verdict_line(alone, symbols, SCAN_TARGET,
                       met=alone.ratio_to(symbols) <= SCAN_RATIO) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("libraries", nargs="+", metavar="LIB")
    parser.add_argument("--host", default="python", help="python, c, c++ or a program")
    timing_options(parser, "the interpreter with elfpatch installed")
    options = parser.parse_args(argv)
    if shutil.which("readelf") is None:
        parser.error("readelf is not installed, and it is what elfpatch is measured against")
    compile_bytecode(options.python)
    return each_input(options.libraries, options.runs,
                      lambda library: benchmark(library, options))


if __name__ == "__main__":
    sys.exit(main())
