"""Registrations and look-ups of a key across libraries (``fixtures/cross_library_registry``).

``libregistry.so`` keeps two registries behind accessors' function-local
statics.  ``libshapes.so`` registers "circle" and ``typeid(Square)`` from its
initializer; ``libuser.so`` looks both up from its own.  Neither library
needs the other, so the order of the program's DT_NEEDED entries decides
which runs first; inside one library (``libboth*.so``) the link order of the
two TUs does, and -flto reverses it.  The oracle is what each program
prints: "not found" where the look-up ran first.  ``inits`` reports a
``registration-order`` error exactly there (with ``--closure`` across
libraries, and for one library alone), a link-order warning where the
order is right by chance, and the same findings once every file is
stripped.  Each on x86-64 and on aarch64 (qemu).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.inits import MACHINES, inits, inits_of, printed, scenario

SCENARIO = "cross_library_registry"
KEYS = {"string:circle", "type:_ZTI6Square"}
# program run -> the library of both TUs it loads
ONE_LIBRARY = {
    "one_consumer_first": "libboth.so",
    "one_registrar_first": "libboth_good.so",
    "one_consumer_first_lto": "libboth_lto.so",
    "one_registrar_first_lto": "libboth_good_lto.so",
}


def lost(output: dict[str, str]) -> bool:
    """Whether the look-ups found nothing (both keys fail or succeed together)."""
    assert output["circle"] == output["square"], output
    return output["circle"] == "not found"


def registration_findings(record: dict) -> set[tuple[str, str, str, str | None]]:
    """(severity, kind, key, the registering object's file name) of the look-up findings."""
    return {(r["severity"], r["kind"], r["key"],
             Path(r["registered_in"]).name if "registered_in" in r else None)
            for r in record["risks"] if "key" in r}


def closure_record(program: Path, library: str) -> dict:
    document = inits("--closure", str(program))
    (record,) = [f for f in document["files"] if Path(f["path"]).name == library]
    return record


def stripped_copy(folder: Path, destination: Path) -> Path:
    """Every file of ``folder`` copied to ``destination``, stripped (``--strip-unneeded``)."""
    if shutil.which("strip") is None:
        pytest.skip("strip is not installed (apt-get install binutils)")
    shutil.copytree(folder, destination, dirs_exist_ok=True)
    for path in destination.iterdir():
        if path.read_bytes()[:4] == b"\x7fELF":
            subprocess.run(["strip", "--strip-unneeded", str(path)], check=True,
                           capture_output=True)
    return destination


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["consumer_first", "registrar_first"])
def test_closure_error_exactly_where_the_lookup_found_nothing(program: str, machine: str) -> None:
    built = scenario(SCENARIO, machine)
    found = registration_findings(closure_record(built.path(program), "libuser.so"))
    if lost(printed(built, program)):
        assert found == {("error", "registration-order", key, "libshapes.so") for key in KEYS}
    else:
        # Right only because the program lists libuser.so first: neither needs the other.
        assert found == {("warning", "link-order-dependence", key, "libshapes.so")
                         for key in KEYS}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["consumer_first_string", "registrar_first_string"])
def test_a_name_built_in_place_is_a_key(program: str, machine: str) -> None:
    """Names passed as ``const std::string&``: each caller builds "circle" on its stack
    (a short string: its length and bytes stored as numbers, on aarch64 loaded from
    the literal first) and passes its address."""
    built = scenario(SCENARIO, machine)
    found = registration_findings(closure_record(built.path(program), "libuser_string.so"))
    severity, kind = ("error", "registration-order") if lost(printed(built, program)) \
        else ("warning", "link-order-dependence")
    assert found == {(severity, kind, key, "libshapes_string.so") for key in KEYS}


def test_each_library_alone_has_no_registration_finding() -> None:
    built = scenario(SCENARIO)
    for library in ("libuser.so", "libshapes.so", "libregistry.so"):
        assert not registration_findings(inits_of(built.path(library)))


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(ONE_LIBRARY))
def test_one_library_error_exactly_where_the_lookup_found_nothing(program: str,
                                                                 machine: str) -> None:
    built = scenario(SCENARIO, machine)
    found = registration_findings(inits_of(built.path(ONE_LIBRARY[program])))
    errors = {f for f in found if f[0] == "error"}
    if lost(printed(built, program)):
        assert errors == {("error", "registration-order", key, None) for key in KEYS}
    else:
        assert not errors
        if not program.endswith("_lto"):  # two TUs: the link order decides
            assert found == {("warning", "link-order-dependence", key, None) for key in KEYS}


def test_stripped_builds_give_the_same_findings(tmp_path: Path) -> None:
    built = scenario(SCENARIO)
    copy = stripped_copy(built.dir, tmp_path / "stripped")
    for library in ONE_LIBRARY.values():
        assert registration_findings(inits_of(copy / library)) \
            == registration_findings(inits_of(built.path(library))), library
    for program, user in (("consumer_first", "libuser.so"), ("registrar_first", "libuser.so"),
                          ("consumer_first_string", "libuser_string.so"),
                          ("registrar_first_string", "libuser_string.so")):
        assert registration_findings(closure_record(copy / program, user)) \
            == registration_findings(closure_record(built.path(program), user))
