"""The flags ``inits`` reads as zero at load, against a real process.

``elfpatch inits --json`` lists, per file, the globals no initializer writes
that the code it followed tests (``coverage.quiet_at_load``): the paths they
rule out were left out.  Here each library is opened with dlopen in a fresh
Python process (its folder's libraries found as the loader finds them), which
runs every initializer of it and of its dependencies; then the bytes of each
range are read from the process's memory.  A range that is not zero was set at
load by code ``inits`` did not follow (a call through a pointer, past the call
depth or the budget): the findings that relied on it may be missing.

    python benchmarks/quiet_flags.py [--json] LIBRARY...

Prints one line per library (its ranges, how many read zero, the others with
their bytes) and a total; ``--json`` prints the same as one document.  A
library that cannot be opened (a dependency missing) is reported as such.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# Opens the library, finds where it was mapped, and prints the bytes of each range.
READER = r"""
import ctypes, json, os, sys
path, ranges = os.path.realpath(sys.argv[1]), json.loads(sys.argv[2])
ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
base = None
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split()
        if len(fields) >= 6 and int(fields[2], 16) == 0 \
                and os.path.realpath(fields[5]) == path:
            base = int(fields[0].split("-")[0], 16)
            break
print(json.dumps([ctypes.string_at(base + start, width).hex() for start, width in ranges]))
"""


def quiet_ranges(path: Path, elfpatch: list[str]) -> list[dict[str, Any]]:
    """``coverage.quiet_at_load`` of the one file ``path``."""
    result = subprocess.run([*elfpatch, "inits", "--json", str(path)], capture_output=True,
                            text=True, check=False)
    if result.returncode not in (0, 1):
        raise SystemExit(f"{path}: elfpatch inits failed: {result.stderr.strip()}")
    files = json.loads(result.stdout)["files"]
    return [entry for record in files
            for entry in record.get("coverage", {}).get("quiet_at_load", [])]


def bytes_after_load(path: Path, ranges: list[dict[str, Any]]) -> list[str] | str:
    """The bytes of each range (hex) once ``path`` is loaded, or why it could not be."""
    wanted = json.dumps([[entry["address"], entry["width"]] for entry in ranges])
    result = subprocess.run([sys.executable, "-c", READER, str(path), wanted],
                            capture_output=True, text=True, check=False, timeout=600)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        return lines[-1] if lines else f"exit {result.returncode}"
    found: list[str] = json.loads(result.stdout)
    return found


def check(path: Path, elfpatch: list[str]) -> dict[str, Any]:
    ranges = quiet_ranges(path, elfpatch)
    record: dict[str, Any] = {"path": str(path), "ranges": len(ranges)}
    if not ranges:
        record["zero"] = 0
        record["set"] = []
        return record
    read = bytes_after_load(path, ranges)
    if isinstance(read, str):
        record["not_loaded"] = read
        return record
    record["zero"] = sum(not int(found, 16) for found in read)
    record["set"] = [{**entry, "bytes": found} for entry, found in zip(ranges, read, strict=True)
                     if int(found, 16)]
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--elfpatch", default=f"{sys.executable} -m elfpatch",
                        help="the command that runs elfpatch")
    options = parser.parse_args(argv)
    records = [check(path, options.elfpatch.split()) for path in options.libraries]
    if options.json:
        print(json.dumps({"libraries": records}, indent=1))
        return 0
    for record in records:
        if "not_loaded" in record:
            print(f"{record['path']}: {record['ranges']} ranges, not loaded: "
                  f"{record['not_loaded']}")
            continue
        wrong = ", ".join(f"{entry['object']} ({entry['bytes']})" for entry in record["set"])
        print(f"{record['path']}: {record['ranges']} ranges, {record['zero']} zero after load"
              + (f"; set at load: {wrong}" if wrong else ""))
    loaded = [record for record in records if "not_loaded" not in record]
    print(f"total: {sum(r['ranges'] for r in loaded)} ranges in {len(loaded)} loaded "
          f"libraries, {sum(len(r['set']) for r in loaded)} set at load")
    return 0


if __name__ == "__main__":
    sys.exit(main())
