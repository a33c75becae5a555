"""A global reached as an aarch64 page plus its low bits (``fixtures/page_neighbour``).

``adrp x1, 0x21000; str w0, [x1, #4]`` stores into ``early_level`` at
0x21004; the page's start, 0x21000, is where the 4 KiB begin, not a pointer
to an object.  Taken for one (an object's start, in a file without symbols),
it made ``early_level`` a member of whatever object starts the page
(crtstuff's ``completed.0``), and on opencv 5.0's aarch64 ``cv2.abi3.so`` a
flag read at a page's +36 a member of an object another TU builds: a false
init-order error.  Stripped, the objects ``inits`` sees must be the
unstripped symbols', on both machines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    printed,
    risks,
    same_when_stripped,
    scenario,
    strip_unneeded,
)
from support.readelf import symtab_address, tu_initializer


@pytest.mark.parametrize("machine", MACHINES)
def test_a_pages_start_is_no_objects_start(machine: str, tmp_path: Path) -> None:
    from elfpatch.analysis.init_order import analyse_object_fully
    from elfpatch.elf.file import ElfFile

    built = scenario("page_neighbour", machine)
    assert printed(built, "early_first") == {"early_level": "7", "late_length": "40"}
    path = built.path("early_first")
    assert risks(same_when_stripped(machine, path, tmp_path), *ORDER_KINDS) == []
    early = tu_initializer(path, "early_level")
    expected = (hex(symtab_address(path, "early_level")), hex(symtab_address(path, "tail_level")))
    (tmp_path / "again").mkdir()
    stripped = strip_unneeded(machine, path, tmp_path / "again")
    with ElfFile.open(str(stripped)) as elf:
        analysed = analyse_object_fully(elf, str(stripped)).analysed
    (item,) = [item for item in analysed if item.address == early]
    assert (item.effects.writes, item.effects.reads) == ((expected[0],), (expected[1],))
