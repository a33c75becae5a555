"""Before fix, after ``fix -w``, after ``fix -w --hide preset:cxx-instantiations``: what
glibc does with each library of some wheels, and what elfpatch said it would do.

    python benchmarks/unload_stages.py [--host python|c|c++] [--now] WHEEL...

Each wheel is repaired twice into a temporary folder (``fix -w``, then
``fix -w --hide preset:cxx-instantiations``); every shared library of the
three wheels is then opened in a fresh host process (``unload_probe.probe``:
dlopen, dlclose, /proc/self/maps) and judged by the loader model for the
same host.  One row per wheel and stage: the libraries, those that load,
those whose verdict agrees with glibc, those that stay loaded; then the
totals, and the share of libraries pinned before the fix that the hide
preset lets unload.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from unload_probe import build_host, elf_files, probe, unpacked

STAGES = ("before", "fix -w", "fix -w --hide")
HIDE = ("--hide", "preset:cxx-instantiations")


@dataclass
class Stage:
    """One wheel at one stage: counts, and the members that stayed loaded."""

    libraries: int = 0
    loaded: int = 0
    agree: int = 0
    stayed: set[str] = dataclasses.field(default_factory=set)
    disagreements: list[str] = dataclasses.field(default_factory=list)
    crashed: dict[str, str] = dataclasses.field(default_factory=dict)  # member: how it died


def repaired(wheel: Path, folder: Path, extra: Sequence[str]) -> Path:
    """``wheel`` repaired by ``elfpatch fix -w`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "elfpatch", "fix", "-q", str(wheel), "-w",
                           str(folder), *extra], capture_output=True, text=True, timeout=3600,
                          check=False)
    if done.returncode != 0:
        sys.exit(f"elfpatch fix -w {' '.join(extra)} failed on {wheel}: {done.stderr.strip()}")
    return folder / wheel.name


def judge(wheel: Path, scratch: Path, host_command: list[str], options: argparse.Namespace
          ) -> Stage:
    from elfpatch.loader.dlopen import LoadHost
    from elfpatch.service.load import load_verdict

    host = dataclasses.replace(LoadHost.named(options.host), bind_now=options.now)
    root = unpacked(wheel, scratch)
    stage = Stage()
    for library in elf_files(root):
        real = probe(host_command, library, now=options.now)
        if real.error.startswith("host exited"):
            stage.crashed[str(library.relative_to(root))] = real.error
            continue
        if real.preloaded:
            continue
        stage.libraries += 1
        verdict = load_verdict(library, host)
        member = str(library.relative_to(root))
        if not real.loaded:
            continue
        stage.loaded += 1
        if real.unloaded == verdict.unloads:
            stage.agree += 1
        else:
            stage.disagreements.append(f"{member}: glibc {'unloads' if real.unloaded else 'keeps'}"
                                       f" it, elfpatch said {verdict.unloads}")
        if not real.unloaded:
            stage.stayed.add(member)
    return stage


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--host", default="python", choices=("python", "c", "c++"))
    parser.add_argument("--now", action="store_true", help="dlopen with RTLD_NOW")
    options = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="unload-stages-"))
    totals = {name: Stage() for name in STAGES}
    pinned = freed = 0
    try:
        host_command = build_host(options.host, scratch)
        print("wheel | stage | libraries | load | verdict agrees | stay loaded")
        for number, wheel in enumerate(options.wheels):
            work = scratch / str(number)
            wheels = (wheel, repaired(wheel, work / "fixed", ()),
                      repaired(wheel, work / "hidden", HIDE))
            stages = [judge(w, work / f"unpacked{k}", host_command, options)
                      for k, w in enumerate(wheels)]
            for name, stage in zip(STAGES, stages, strict=True):
                print(f"{wheel.name.split('-')[0]} | {name} | {stage.libraries} | "
                      f"{stage.loaded} | {stage.agree} | {len(stage.stayed)}")
                for line in stage.disagreements:
                    print(f"    DIFFER {line}")
                for member, error in sorted(stage.crashed.items()):
                    print(f"    CRASH {member}: {error}")
                total = totals[name]
                total.libraries += stage.libraries
                total.loaded += stage.loaded
                total.agree += stage.agree
                total.stayed |= {f"{number}:{m}" for m in stage.stayed}
            pinned += len(stages[0].stayed)
            # A library whose probe died after the fix was not seen to unload.
            freed += len(stages[0].stayed - stages[2].stayed - stages[2].crashed.keys())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for name, total in totals.items():
        share = 100.0 * total.agree / total.loaded if total.loaded else 100.0
        print(f"all | {name} | {total.libraries} | {total.loaded} | {total.agree} "
              f"({share:.1f}%) | {len(total.stayed)}")
    rate = 100.0 * freed / pinned if pinned else 100.0
    print(f"the hide preset lets {freed} of the {pinned} libraries pinned before the fix "
          f"unload ({rate:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
