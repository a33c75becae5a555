"""An error's fields are fixed when it is made; its message is built from them when printed."""

from __future__ import annotations

import pickle
import sys
import zipfile
from pathlib import Path

import pytest
from support.build import invoke, platform
from support.zipcraft import record_hash

from elfpatch.errors import CorruptElfError, ElfpatchError, InputError


def _raised() -> CorruptElfError:
    try:
        raise CorruptElfError("/tmp/scratch-1234", "truncated .dynsym", hint="rebuild it")
    except CorruptElfError as error:
        return error


def test_the_message_is_the_one_line_built_from_the_fields() -> None:
    error = CorruptElfError("lib.so", "truncated .dynsym", hint="rebuild it")
    assert str(error) == error.one_line() == "lib.so: truncated .dynsym (hint: rebuild it)"
    assert str(InputError("x", "missing")) == "x: missing"


@pytest.mark.parametrize("field", ["path", "reason", "hint", "detail"])
def test_no_field_can_be_reassigned(field: str) -> None:
    error = CorruptElfError("lib.so", "truncated .dynsym")
    with pytest.raises(AttributeError, match="relabelled"):
        setattr(error, field, "changed")
    assert str(error) == "lib.so: truncated .dynsym"


def test_relabelling_makes_a_new_error_and_leaves_the_old_one() -> None:
    original = _raised()
    relabelled = original.relabelled("pkg.whl:pkg/_native.so")
    assert type(relabelled) is CorruptElfError and relabelled is not original
    assert str(relabelled) == "pkg.whl:pkg/_native.so: truncated .dynsym (hint: rebuild it)"
    assert str(original) == original.one_line() == \
        "/tmp/scratch-1234: truncated .dynsym (hint: rebuild it)"
    assert relabelled.__traceback__ is original.__traceback__ is not None


def test_other_attributes_and_notes_still_work() -> None:
    error = CorruptElfError("lib.so", "bad")
    error.__cause__ = ValueError("why")
    if sys.version_info >= (3, 11):
        error.add_note("seen while fixing")
        assert error.__notes__ == ["seen while fixing"]
    assert isinstance(error, ElfpatchError)


def test_an_error_crosses_a_process_boundary_whole() -> None:
    error = CorruptElfError("lib.so", "bad table", hint="relink", detail="Traceback ...")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.path, copy.reason, copy.hint, copy.detail) == \
        (CorruptElfError, "lib.so", "bad table", "relink", "Traceback ...")
    assert str(copy) == str(error)


def _wheel_around(path: Path, member: bytes) -> Path:
    """A wheel whose RECORD is right and whose one ELF member is ``member``."""
    wheel_text = b"Wheel-Version: 1.0\n"
    rows = [f"pkg/_native.so,{record_hash(member)},{len(member)}",
            f"pkg-1.0.dist-info/WHEEL,{record_hash(wheel_text)},{len(wheel_text)}",
            "pkg-1.0.dist-info/RECORD,,"]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pkg/_native.so", member)
        archive.writestr("pkg-1.0.dist-info/WHEEL", wheel_text)
        archive.writestr("pkg-1.0.dist-info/RECORD", "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(("offset", "value", "reason"), [
    (4, 9, "unknown ELF class 9 in e_ident"),  # refused when the member is opened
    (0x2F, 0x7F, "section header 0 (offset 0x7f"),  # refused while it is read
])
def test_a_bad_member_is_named_by_wheel_and_member_not_scratch_file(
        offset: int, value: int, reason: str, tmp_path: Path) -> None:
    """The member is inflated to a scratch file: the error is relabelled twice on its way
    up (member name, then wheel), each time as a new error."""
    member = bytearray(platform("host").library().read_bytes())
    member[offset] = value
    wheel = _wheel_around(tmp_path / "pkg-1.0-py3-none-any.whl", bytes(member))
    result = invoke("fix", "-q", "-w", str(tmp_path / "out"), str(wheel))
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.startswith(f"elfpatch: error: {wheel}:pkg/_native.so: {reason}")
    assert not (tmp_path / "out").exists()
