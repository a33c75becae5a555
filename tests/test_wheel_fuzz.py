"""Fuzzing ``fix -w``, ``scan`` and ``check`` with 2,000 damaged copies of real wheels.

The wheels are the ``wheel`` fixture's (a gcc-built extension) and a
variant with data descriptors, zip64 extra fields and a stored member.
Each copy has bytes flipped (anywhere, in the local headers, in the
central directory and end record), a 4-byte field set to an extreme value,
or is cut short.  Every run must end in a result or in ``ElfpatchError``s:
no other exception (an internal error), no file written outside OUTDIR
(the test's whole temporary root, TMPDIR included, is compared after each
run) and no run longer than a generous alarm (a hang).  The runs are
in-process, so that 2,000 of them take well under a minute.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from support.record import assert_record_matches
from support.zipcraft import build, wheel_entries, with_record

from elfpatch.elf.source import archives_kept_open
from elfpatch.errors import ElfpatchError
from elfpatch.plan.bindings import FixOptions
from elfpatch.service.check import run_check
from elfpatch.service.policy_file import load_policy
from elfpatch.service.runner import scan_paths
from elfpatch.service.wheel_fix import fix_wheels

MUTANTS = 2000
ALARM_SECONDS = 30
FIELDS = (0, 0xFFFFFFFF, 0x7FFFFFFF, 0xFFFF, 0x80000000, 1)


class Hang(Exception):
    pass


def _variant(wheel: Path) -> bytes:
    """The same wheel with data descriptors, zip64 extras and a stored member."""
    entries = with_record(wheel_entries(wheel))
    changed = []
    for number, entry in enumerate(entries):
        if number == 0:
            entry = replace(entry, method=0)
        changed.append(replace(entry, descriptor=number % 2 == 1, zip64=number % 3 == 2))
    return build(changed)


def _mutants(sources: list[bytes], seed: int) -> Iterator[tuple[str, bytes]]:
    chooser = random.Random(seed)
    for number in range(MUTANTS):
        data = bytearray(sources[number % len(sources)])
        kind = chooser.choices(["flip", "directory", "headers", "field", "truncate"],
                               weights=[30, 30, 15, 15, 10])[0]
        size = len(data)
        if kind == "truncate":
            yield kind, bytes(data[: chooser.randrange(size)])
            continue
        for _ in range(chooser.randint(1, 4)):
            if kind == "flip":
                at = chooser.randrange(size)
            elif kind == "directory":  # the central directory and the end record
                at = chooser.randrange(data.rfind(b"PK\x01\x02", 0, data.rfind(b"PK\x01\x02"))
                                       if b"PK\x01\x02" in data else 0, size)
            elif kind == "headers":  # somewhere in a local header
                starts = [i for i in range(size - 30) if data[i : i + 4] == b"PK\x03\x04"]
                at = chooser.choice(starts) + chooser.randrange(4, 30) if starts else 0
            else:
                at = chooser.randrange(max(1, size - 4))
                data[at : at + 4] = chooser.choice(FIELDS).to_bytes(4, "little")
                continue
            data[at] ^= chooser.randrange(1, 256)
        yield kind, bytes(data)


def _listing(root: Path, skip: Path) -> set[str]:
    found = set()
    for directory, folders, files in os.walk(root):
        if Path(directory) == skip or skip in Path(directory).parents:
            continue
        for name in folders + files:
            if Path(directory, name) != skip:
                found.add(str(Path(directory, name).relative_to(root)))
    return found


def _alarm(_signal: int, _frame: object) -> None:
    raise Hang


def _guarded(action: Callable[[], object]) -> str | None:
    """None, or what went wrong: an internal error or a hang.  The action is one call,
    as the API makes it: the wheels it opens are its own, and closed when it ends."""
    signal.alarm(ALARM_SECONDS)
    try:
        with archives_kept_open():
            action()
    except ElfpatchError:
        return None
    except Hang:
        return "hang"
    except Exception as error:  # the point of the test: anything else is a bug
        return f"internal error: {type(error).__name__}: {error}"
    finally:
        signal.alarm(0)
    return None


def _record_problem(written: Path) -> str | None:
    """None, or why the written wheel's RECORD does not match its members."""
    try:
        assert_record_matches(written)
    except Exception as error:  # AssertionError or the wheel package's WheelError
        return f"written wheel's RECORD is wrong: {type(error).__name__}: {error}"
    return None


def test_damaged_wheels_give_clean_errors_only(wheel: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    (root / "tmp").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(root / "tmp"))
    monkeypatch.setenv("TMPDIR", str(root / "tmp"))
    previous = signal.signal(signal.SIGALRM, _alarm)
    out = root / "out"
    mutant = root / wheel.name
    policy = load_policy(os.devnull)
    sources = [wheel.read_bytes(), _variant(wheel)]
    problems: list[str] = []
    kinds: dict[str, int] = {}
    repaired = 0
    try:
        for number, (kind, data) in enumerate(_mutants(sources, seed=20260101)):
            kinds[kind] = kinds.get(kind, 0) + 1
            mutant.write_bytes(data)
            before = _listing(root, out)
            steps: list[tuple[str, Callable[[], object]]] = [
                ("fix", lambda: fix_wheels([str(mutant)], str(out), FixOptions())),
                ("scan", lambda: scan_paths([str(mutant)])),
            ]
            if number % 3 == 0:
                steps.append(("check", lambda: run_check([str(mutant)], policy, set(), 1)))
            for name, step in steps:
                problem = _guarded(step)
                if problem:
                    problems.append(f"mutant {number} ({kind}), {name}: {problem}")
            stray = (_listing(root, out) ^ before) | {f"tmp/{p.name}" for p in
                                                       (root / "tmp").iterdir()}
            if stray:
                problems.append(f"mutant {number} ({kind}): written outside OUTDIR: {stray}")
            if out.exists():
                written = [p.name for p in out.iterdir()]
                if written not in ([], [wheel.name]):
                    problems.append(f"mutant {number} ({kind}): OUTDIR holds {written}")
                repaired += bool(written)
                if written:  # harmless damage: the wheel written must still be whole
                    problem = _record_problem(out / wheel.name)
                    if problem:
                        problems.append(f"mutant {number} ({kind}): {problem}")
                shutil.rmtree(out)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert not problems, "\n".join(problems[:20])
    assert sum(kinds.values()) == MUTANTS >= 1000
    assert 0 < repaired < MUTANTS  # some damage is harmless (a timestamp), most is not
