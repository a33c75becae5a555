"""An analysis that fails on one input: that input's fault, or elfpatch's, told apart.

A bug is planted in the analysis (in-process, through ``monkeypatch``) for
one of two inputs.  On a file whose every header and table reads cleanly
the failure is elfpatch's: one "internal error" line naming the file, the
other input still reported, exit code 3, and ``"internal": true`` in the
JSON.  On a file with a table that does not read back, the same failure is
the input's: its error says what is wrong with that table, exit code 2.
A forked half's failure is judged the same way instead of ending the run.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile
from support.build import invoke, platform

import elfpatch.service.check as check_service
import elfpatch.service.inits as inits_service
from elfpatch.errors import ExitCode
from elfpatch.service.parallel import run_alongside


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a library the planted bug leaves alone, an identical copy it strikes)."""
    built = platform("host").library()
    folder = tmp_path_factory.mktemp("failing")
    good, struck = folder / "libgood.so", folder / "libstruck.so"
    shutil.copyfile(built, good)
    shutil.copyfile(built, struck)
    return good, struck


def planted(original: Callable[..., Any], failure: Callable[[], object]) -> Callable[..., Any]:
    """``original``, but ``failure()`` for any file named like ``libstruck``."""
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if any("libstruck" in str(arg) for arg in (*args, *kwargs.values())):
            failure()
        return original(*args, **kwargs)
    return wrapped


def key_error() -> None:
    raise KeyError("planted")


def in_the_forked_half() -> None:
    """A failure of the half that runs in a forked child (``run_alongside``)."""
    run_alongside(lambda: None, key_error)


def interrupt_in_the_forked_half() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt
    run_alongside(lambda: None, interrupted)


def strike_inits(monkeypatch: pytest.MonkeyPatch, failure: Callable[[], object]) -> None:
    monkeypatch.setattr(inits_service, "analyse_object_fully",
                        planted(inits_service.analyse_object_fully, failure))


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("elfpatch:")]


@pytest.mark.parametrize("failure", [key_error, in_the_forked_half])
def test_a_bug_on_a_clean_file_is_internal_and_the_others_go_on(
        failure: Callable[[], object], libraries: tuple[Path, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    good, struck = libraries
    strike_inits(monkeypatch, failure)
    result = invoke("inits", "--json", str(struck), str(good))
    assert result.exception is None, result.exception
    assert result.exit_code == ExitCode.INTERNAL, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"elfpatch: internal error: {struck}: the analysis failed ("), \
        lines[0]
    assert "KeyError: 'planted'" in lines[0] and "reads cleanly" in lines[0]
    assert "malformed" not in lines[0] and "rerun with --traceback" in lines[0]
    document = json.loads(result.stdout)
    assert [f["path"] for f in document["files"]] == [str(good)]
    assert [(e["path"], e.get("internal")) for e in document["errors"]] == [(str(struck), True)]


def test_in_a_closure_the_other_objects_go_on(libraries: tuple[Path, Path],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _good, struck = libraries
    strike_inits(monkeypatch, key_error)
    result = invoke("inits", "--json", "--closure", str(struck))
    assert result.exit_code == ExitCode.INTERNAL, result.stderr
    document = json.loads(result.stdout)
    assert [(e["path"], e.get("internal")) for e in document["errors"]] == [(str(struck), True)]
    assert document["files"] and str(struck) not in [f["path"] for f in document["files"]]


def test_an_interrupt_of_the_forked_half_is_an_interrupt(libraries: tuple[Path, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    good, struck = libraries
    strike_inits(monkeypatch, interrupt_in_the_forked_half)
    result = invoke("inits", "--json", str(struck), str(good))
    assert result.exit_code == ExitCode.INTERRUPTED, result.stderr
    assert error_lines(result.stderr) == ["elfpatch: interrupted"]


def test_the_text_report_counts_it_apart(libraries: tuple[Path, Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    good, struck = libraries
    strike_inits(monkeypatch, key_error)
    result = invoke("inits", str(struck), str(good), "/no/such/libmissing.so")
    assert result.exit_code == ExitCode.INTERNAL, result.stderr
    assert "1 input could not be read; elfpatch failed on 1 input (a bug of elfpatch)" \
        in result.stdout
    assert sorted(line.split(":")[1].strip() for line in error_lines(result.stderr)) \
        == ["error", "internal error"]


def test_with_traceback_the_bug_is_shown(libraries: tuple[Path, Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _good, struck = libraries
    strike_inits(monkeypatch, key_error)
    result = invoke("--traceback", "inits", str(struck))
    assert result.exit_code == ExitCode.INTERNAL
    assert "Traceback" in result.stderr and "key_error" in result.stderr


def test_check_fails_as_a_bug(libraries: tuple[Path, Path],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    good, struck = libraries
    monkeypatch.setattr(check_service, "facts_of", planted(check_service.facts_of, key_error))
    result = invoke("check", "--config", os.devnull, str(struck), str(good))
    assert result.exit_code == ExitCode.INTERNAL, result.stderr
    assert "check failed: elfpatch failed on 1 input (a bug of elfpatch)" in result.stdout
    document = json.loads(invoke("check", "--format", "json", "--config", os.devnull,
                                 str(struck), str(good)).stdout)
    assert document["errors"][0]["internal"] is True
    assert [file["path"] for file in document["files"]] == [str(good)]


def broken_gnu_hash(source: Path, destination: Path) -> Path:
    """``source`` with a .gnu.hash whose bucket count runs far past the file: a table
    the initializer analysis never reads."""
    data = bytearray(source.read_bytes())
    with source.open("rb") as stream:
        section = ELFFile(stream).get_section_by_name(".gnu.hash")
        offset = section["sh_offset"]
    struct.pack_into("<I", data, offset, 0x7FFFFFFF)
    destination.write_bytes(bytes(data))
    return destination


def test_a_corrupt_table_makes_it_the_inputs_fault(libraries: tuple[Path, Path],
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    good, struck = libraries
    broken = broken_gnu_hash(struck, tmp_path / "libstruck_hash.so")
    assert invoke("inits", "--json", str(broken)).exit_code == ExitCode.OK  # not read there
    strike_inits(monkeypatch, lambda: struct.unpack("<I", b""))
    result = invoke("inits", "--json", str(broken), str(good))
    assert result.exit_code == ExitCode.BAD_INPUT, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"elfpatch: error: {broken}: "), lines
    assert ".gnu.hash" in lines[0] and "internal" not in lines[0]
    document = json.loads(result.stdout)
    assert "internal" not in document["errors"][0]
