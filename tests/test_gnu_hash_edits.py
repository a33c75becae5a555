""".gnu.hash after removing symbols, against the table rebuilt from scratch from the names.

The writer changes only what the removal of symbols forces (chains lose
entries, end bits pass to a neighbour, buckets restart, Bloom words that the
removed symbols set are rebuilt).  Here any subset of the hashed symbols is
removed (whole buckets, first and last of a run, everything) and the result
must equal, byte for byte, the table a linker would build for the symbols
left: each hash computed from the symbol's name, buckets in the old order.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from elfpatch.fixtures import build
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elfpatch.elf.file import ElfFile
from elfpatch.elf.hashes import read_gnu_hash
from elfpatch.elf.symbols import read_dynsym
from elfpatch.patch.reorder import Reordering, first_global_index, gnu_hash_edits


def _exports(count: int) -> dict[str, str]:
    body = "".join(f'extern "C" int export_{i}() {{ return {i}; }}\n' for i in range(count))
    return {"exports.cpp": body}


@pytest.fixture(scope="module")
def libraries(cxx: object) -> dict[str, Path]:
    """Many buckets (some empty, some with several symbols), and a single bucket."""
    return {
        "many": build.build_shared(_exports(150), "libmanyexports", ["-Wl,--hash-style=gnu"]),
        "one": build.build_shared(_exports(1), "liboneexport", ["-Wl,--hash-style=gnu"]),
    }


def _gnu_hash_of(name: bytes) -> int:
    h = 5381
    for byte in name:
        h = (h * 33 + byte) % (1 << 32)
    return h


def _expected_table(path: Path, removed: set[int]) -> tuple[int, list[int], list[int], list[int]]:
    """(symoffset, bloom words, buckets, chains) for the hashed symbols not removed."""
    with ElfFile.open(path) as elf:
        table, symbols = read_gnu_hash(elf), read_dynsym(elf)
        assert table is not None and symbols is not None
        kept = [i for i in range(table.symoffset, symbols.count) if i not in removed]
        hashes = [_gnu_hash_of(symbols.name(i).encode()) for i in kept]
        nbuckets, bits = table.nbuckets, 8 * table.word_size
        symoffset = symbols.count - len(kept)
        bloom = [0] * table.bloom_size
        buckets = [0] * nbuckets
        chains = []
        for position, h in enumerate(hashes):
            bloom[(h // bits) % table.bloom_size] |= 1 << (h % bits)
            bloom[(h // bits) % table.bloom_size] |= 1 << ((h >> table.bloom_shift) % bits)
            bucket = h % nbuckets
            if not buckets[bucket]:
                buckets[bucket] = symoffset + position
            last = position + 1 == len(hashes) or hashes[position + 1] % nbuckets != bucket
            chains.append((h & ~1) | last)
        chains += [0] * (symbols.count - table.symoffset - len(chains))
        return symoffset, bloom, buckets, chains


def _edited_table(path: Path, removed: set[int]) -> tuple[int, list[int], list[int], list[int]]:
    data = bytearray(path.read_bytes())
    with ElfFile.open(path) as elf:
        table, symbols = read_gnu_hash(elf), read_dynsym(elf)
        assert table is not None and symbols is not None
        reordering = Reordering(symbols.count, first_global_index(symbols), tuple(sorted(removed)))
        for edit in gnu_hash_edits(elf, table, reordering, symbols.name_bytes):
            data[edit.offset : edit.offset + len(edit.data)] = edit.data
        word, count = table.word_size, symbols.count
    start = table.offset
    words = [int.from_bytes(data[start + 16 + i * word : start + 16 + (i + 1) * word], "little")
             for i in range(table.bloom_size)]

    def u32(offset: int) -> int:
        return int.from_bytes(data[offset : offset + 4], "little")

    buckets = [u32(table.buckets_offset + 4 * b) for b in range(table.nbuckets)]
    chains = [u32(table.chains_offset + 4 * i) for i in range(count - table.symoffset)]
    return u32(start + 4), words, buckets, chains


def _hashed_range(path: Path) -> range:
    with ElfFile.open(path) as elf:
        table, symbols = read_gnu_hash(elf), read_dynsym(elf)
        assert table is not None and symbols is not None
        return range(table.symoffset, symbols.count)


def test_the_many_bucket_library_has_shared_and_empty_buckets(libraries: dict[str, Path]) -> None:
    """What the property below relies on: the shapes it must handle are there."""
    symoffset, _bloom, buckets, chains = _expected_table(libraries["many"], set())
    runs = [b for b in buckets if b]
    assert 0 in buckets and len(runs) < len(chains)  # an empty bucket, a bucket of several
    assert _edited_table(libraries["many"], set())[0] == symoffset


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_removing_any_symbols_gives_the_table_rebuilt_from_names(
        libraries: dict[str, Path], data: st.DataObject) -> None:
    path = libraries["many"]
    hashed = _hashed_range(path)
    removed = data.draw(st.sets(st.sampled_from(list(hashed)), max_size=len(hashed)))
    if not removed:
        return
    assert _edited_table(path, removed) == _expected_table(path, removed)


@pytest.mark.parametrize("which", ["first-run", "every-other", "all-but-one", "all"])
def test_shapes_of_removal(libraries: dict[str, Path], which: str) -> None:
    path = libraries["many"]
    hashed = list(_hashed_range(path))
    removed = {
        "first-run": set(hashed[:5]),
        "every-other": set(hashed[::2]),
        "all-but-one": set(hashed[1:]),
        "all": set(hashed),
    }[which]
    assert _edited_table(path, removed) == _expected_table(path, removed)


def _single_bucket_copy(source: Path, destination: Path) -> Path:
    """``source`` with its two-bucket .gnu.hash (one symbol, in bucket 0) folded into one bucket.

    Linkers give even one export two buckets or more; a single bucket is
    legal and leaves the low bit of each hash to the name.
    """
    data = bytearray(source.read_bytes())
    with ElfFile.open(source) as elf:
        table = read_gnu_hash(elf)
        assert table is not None and table.nbuckets == 2 and list(table.buckets)[1] == 0
        chain = data[table.chains_offset : table.chains_offset + 4]
    data[table.offset : table.offset + 4] = (1).to_bytes(4, "little")
    data[table.buckets_offset + 4 : table.buckets_offset + 8] = chain
    destination.write_bytes(bytes(data))
    return destination


def test_single_bucket_table_hashes_the_names(libraries: dict[str, Path], tmp_path: Path) -> None:
    path = _single_bucket_copy(libraries["one"], tmp_path / "libsingle.so")
    with ElfFile.open(path) as elf:
        table = read_gnu_hash(elf)
        assert table is not None and table.nbuckets == 1
    removed = set(_hashed_range(path))
    assert _edited_table(path, removed) == _expected_table(path, removed)
