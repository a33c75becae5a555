"""How fast `elfpatch scan --json` is next to the tools people already use.

    python benchmarks/scan.py [--runs N] LIB...

For each library, times (alternating, N rounds after a warm-up round):
`elfpatch scan --json --no-loader` (the symbols alone), `elfpatch scan --json`
(with the loader's load and unload verdict), `readelf --dyn-syms -W`, `nm -D`, a per-symbol
pyelftools loop over .dynsym, and a LIEF parse, the last two in their own
Python processes.  Prints the median wall time, the ratio against readelf,
and each command's peak resident memory.  The goal for the symbols alone: no
slower than readelf, and under 150 MiB peak RSS.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Command,
    Measurements,
    alternate,
    by_name,
    compile_bytecode,
    each_input,
    elfpatch_argv,
    table,
    timing_options,
)

PYELFTOOLS_LOOP = """
import sys
from elftools.elf.elffile import ELFFile
with open(sys.argv[1], "rb") as stream:
    dynsym = ELFFile(stream).get_section_by_name(".dynsym")
    unique = sum(1 for s in dynsym.iter_symbols()
                 if s["st_info"]["bind"] in ("STB_GNU_UNIQUE", "STB_LOOS"))
print(unique)
"""

LIEF_PARSE = """
import sys
import lief
lief.logging.disable()
binary = lief.parse(sys.argv[1])
print(sum(1 for s in binary.dynamic_symbols if s.binding == lief.ELF.Symbol.BINDING.GNU_UNIQUE))
"""

BASELINE = "readelf --dyn-syms -W"
TARGET_RSS_MIB = 150


def commands_for(library: str, python: str) -> list[Command]:
    # The symbols alone first (the target: no slower than readelf); then with the
    # loader's verdict, whose own target (2x readelf -W -r) benchmarks/loader.py checks.
    found = [Command("elfpatch scan --json --no-loader",
                     elfpatch_argv(python, "scan", "--json", "--no-loader", library)),
             Command("elfpatch scan --json", elfpatch_argv(python, "scan", "--json", library))]
    for tool, name, argv in (("readelf", BASELINE, ("readelf", "--dyn-syms", "-W", library)),
                             ("nm", "nm -D", ("nm", "-D", library))):
        if shutil.which(tool):
            found.append(Command(name, argv))
        else:
            print(f"note: {tool} is not installed; left out", file=sys.stderr)
    found.append(Command("pyelftools .dynsym loop", (python, "-c", PYELFTOOLS_LOOP, library)))
    found.append(Command("LIEF parse", (python, "-c", LIEF_PARSE, library)))
    return found


def unique_counts(library: str, python: str) -> str:
    """A sanity line: elfpatch and readelf count the same UNIQUE symbols in .dynsym."""
    document = json.loads(subprocess.run(elfpatch_argv(python, "scan", "--json", library),
                                         capture_output=True, text=True, check=True).stdout)
    ours = sum(1 for u in document["files"][0]["unique"] if u["table"] == ".dynsym")
    line = f"UNIQUE in .dynsym: elfpatch {ours}"
    if shutil.which("readelf"):
        text = subprocess.run(["readelf", "--dyn-syms", "-W", library], capture_output=True,
                              text=True, check=True).stdout
        line += f", readelf {sum(1 for row in text.splitlines() if ' UNIQUE ' in row)}"
    return line


def verdict(results: list[Measurements], baseline: str) -> str:
    ours = results[0]
    parts = []
    if baseline == BASELINE:
        faster = ours.median_seconds <= by_name(results, BASELINE).median_seconds
        parts.append("no slower than readelf" if faster else "SLOWER than readelf")
    parts.append(f"peak RSS {ours.peak_rss_mib:.0f} MiB "
                 f"({'under' if ours.peak_rss_mib < TARGET_RSS_MIB else 'OVER'} "
                 f"{TARGET_RSS_MIB} MiB)")
    return "elfpatch: " + "; ".join(parts)


def benchmark(library: str, options: argparse.Namespace) -> None:
    commands = commands_for(library, options.python)
    results = alternate(commands, options.runs, options.warmup)
    baseline = BASELINE if any(c.name == BASELINE for c in commands) else commands[0].name
    print(table(results, baseline))
    print(unique_counts(library, options.python))
    print(verdict(results, baseline) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("libraries", nargs="+", metavar="LIB")
    timing_options(parser, "the interpreter with elfpatch, pyelftools and LIEF installed")
    options = parser.parse_args(argv)
    compile_bytecode(options.python)
    return each_input(options.libraries, options.runs,
                      lambda library: benchmark(library, options))


if __name__ == "__main__":
    sys.exit(main())
