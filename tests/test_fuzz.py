"""Mutated ELF bytes only ever produce elfpatch's own clean errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from elfpatch.fixtures import build
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scan import LIBRARY

from elfpatch.analysis.initializers import list_initializers
from elfpatch.analysis.unique import scan_elf
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError
from elfpatch.patch.fix import fix_paths
from elfpatch.patch.plan import FixOptions
from elfpatch.runner import scan_paths

_SEED: dict[str, bytes] = {}


def seed() -> bytes:
    if "library" not in _SEED:
        if not build.compiler_available():
            pytest.skip("no C++ compiler (g++) installed")
        _SEED["library"] = build.build_shared(LIBRARY, "libstatics", ["-O1"]).read_bytes()
    return _SEED["library"]


mutation = st.tuples(st.integers(min_value=0, max_value=1 << 20), st.binary(min_size=1, max_size=8))


def mutate(data: bytes, edits: list[tuple[int, bytes]], cut: int | None) -> bytes:
    content = bytearray(data)
    for offset, patch in edits:
        # Favour the headers and tables at the front, where structure lives.
        position = offset % min(len(content), 4096 if offset % 3 else len(content))
        content[position : position + len(patch)] = patch
    return bytes(content[:cut] if cut else content)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(mutation, min_size=1, max_size=6),
       cut=st.one_of(st.none(), st.integers(min_value=1, max_value=1 << 16)))
def test_only_clean_errors_escape(tmp_path: Path, edits: list[tuple[int, bytes]],
                                  cut: int | None) -> None:
    target = tmp_path / "mutant.so"
    target.write_bytes(mutate(seed(), edits, cut))
    # The analyses themselves, without the runner's safety net: only ElfpatchError may escape.
    try:
        with ElfFile.open(target) as elf:
            scan_elf(elf, str(target))
            list_initializers(elf, str(target))
    except ElfpatchError:
        pass
    outcome = scan_paths([str(target)])
    assert all(isinstance(e, ElfpatchError) for e in outcome.errors)
    result = fix_paths([str(target)], FixOptions(), str(tmp_path / "out.so"))
    assert all(isinstance(e, ElfpatchError) for e in result.errors)
