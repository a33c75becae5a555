"""A relocatable object (``.o``) on the command line or in a wheel (``inits``, ``check``).

PySide6 6.12's wheel ships two ``.o`` files (Qt resources' initializers, for
linking into a program).  Their ``.init_array`` slots hold zeros until a link
fills them in: ``inits`` called each corrupt ("address 0x0 is not inside any
loaded segment") and ``check`` of the wheel stopped with "could not read 2
inputs", exit 2.  Such an object is never run as it is: it lists no
initializers of its own and says why, and a wheel holding one is checked like
any other.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_elfpatch
from support.build import compile_linked, make_wheel
from support.readelf import readelf_relocations, readelf_sections

SOURCE = """
int answer();
int cached = answer();
int answer() { return 42; }
"""


def _relocatable(folder: Path) -> Path:
    found = compile_linked("g++", "c++", folder / "init.o", SOURCE, flags=("-c",))
    # What makes it worth a test: an initializer slot the link has yet to fill in.
    assert any(s.name == ".init_array" for s in readelf_sections(found))
    assert any(r.section == ".rela.init_array" for r in readelf_relocations(found).entries)
    return found


def test_an_object_file_lists_no_initializers_and_says_why(tmp_path: Path) -> None:
    found = _relocatable(tmp_path)
    text = run_elfpatch("inits", str(found))
    assert text.returncode == 0, text.stderr
    assert "relocatable object (.o)" in text.stdout and not text.stderr
    document = json.loads(run_elfpatch("inits", "--json", str(found)).stdout)
    assert [(f["initializers"], f["risks"]) for f in document["files"]] == [([], [])]
    assert document["errors"] == []


def test_a_wheel_holding_one_is_checked(tmp_path: Path) -> None:
    found = _relocatable(tmp_path)
    library = compile_linked("g++", "c++", tmp_path / "libanswer.so", SOURCE,
                             soname="libanswer.so")
    wheel = make_wheel(tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl", {
        "pkg/__init__.py": b"", "pkg/libanswer.so": library.read_bytes(),
        "pkg/objects/init.cpp.o": found.read_bytes()})
    checked = run_elfpatch("check", "--format", "json", str(wheel))
    assert checked.returncode in (0, 1), checked.stderr
    assert "could not read" not in checked.stdout + checked.stderr
    listed = run_elfpatch("inits", "--json", str(wheel))
    assert listed.returncode == 0, listed.stderr
    files = {f["member"]: f for f in json.loads(listed.stdout)["files"]}
    assert files["pkg/objects/init.cpp.o"]["initializers"] == []
    assert [e["index"] for e in files["pkg/libanswer.so"]["initializers"]
            if e["kind"] == "init_array"]
