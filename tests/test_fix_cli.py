"""`elfpatch fix` through click's CliRunner: exit codes, the JSON document, outputs on disk.

Exit codes: 0 fixed (or nothing to fix), 1 refused by --strict, 2 usage
errors and inputs that cannot be read.  The --json document is checked
against the schema shipped with the package and against readelf.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.build import cxxfilt, invoke, make_wheel
from support.fixlib import VARIANTS, built_library, cross_pair, fix, temporary_files
from support.readelf import readelf_unique

from elfpatch.service import fix as fix_module


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    text = resources.files("elfpatch.report").joinpath("fix.schema.json").read_text()
    return json.loads(text)


def copy_of(library: Path, folder: Path, name: str = "libfixme.so") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(library, folder / name)
    return folder / name


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


# -- exit codes ---------------------------------------------------------------------

def test_exit_0_when_fixed_and_when_nothing_is_left(library: Path, tmp_path: Path) -> None:
    source = copy_of(library, tmp_path)
    first = fix("--in-place", source, as_json=False)
    assert (first.exit_code, first.stderr) == (0, "")
    assert "rewritten" in first.stdout
    second = fix("--in-place", source, as_json=False)
    assert (second.exit_code, second.stderr) == (0, "")
    assert "0 changes" in second.stdout


def test_exit_1_when_strict_refuses_and_nothing_is_written(tmp_path: Path) -> None:
    folder = cross_pair(tmp_path / "pair")
    before = listing(folder)
    out = tmp_path / "out"
    for target in (("--in-place",), ("-o", str(out))):
        run = fix("--strict", *target, folder / "libbase.so", folder / "libuser.so",
                  as_json=False)
        assert run.exit_code == 1
        assert "Registry<int>::count" in run.stdout and "libuser.so" in run.stdout
        assert listing(folder) == before
        assert not out.exists()


@pytest.mark.parametrize("args", [
    pytest.param(("{lib}",), id="neither -o nor --in-place"),
    pytest.param(("--in-place", "-o", "{tmp}/out.so", "{lib}"), id="both -o and --in-place"),
    pytest.param(("--strict", "--force", "--in-place", "{lib}"), id="--strict with --force"),
    pytest.param(("--to", "hidden", "--in-place", "{lib}"), id="unknown mode"),
    pytest.param(("--only", "(", "--in-place", "{lib}"), id="bad regular expression"),
    pytest.param(("--in-place",), id="no path"),
])
def test_exit_2_for_usage_errors(args: tuple[str, ...], library: Path, tmp_path: Path) -> None:
    source = copy_of(library, tmp_path)
    before = listing(tmp_path)
    result = invoke("fix", *(a.format(lib=source, tmp=tmp_path) for a in args))
    assert result.exception is None, result.exception
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stderr.strip() and listing(tmp_path) == before


@pytest.mark.parametrize("case", ["missing", "not ELF", "empty", "truncated", "folder of text"])
def test_exit_2_for_bad_input_and_nothing_is_written(case: str, library: Path,
                                                     tmp_path: Path) -> None:
    good = copy_of(library, tmp_path / "in")
    bad = tmp_path / "in" / "bad.so"
    if case == "not ELF":
        bad.write_text("not an ELF file\n")
    elif case == "empty":
        bad.write_bytes(b"")
    elif case == "truncated":
        bad.write_bytes(library.read_bytes()[:200])
    elif case == "folder of text":
        bad = tmp_path / "texts"
        bad.mkdir()
        (bad / "readme.txt").write_text("hello\n")
    before = listing(tmp_path)
    for target in (("--in-place",), ("-o", str(tmp_path / "out"))):
        run = fix(*target, good, bad)
        assert run.exit_code == 2
        assert run.document is not None
        assert [e["path"] for e in run.document["errors"]] == [str(bad)]
        assert run.stderr.count("\n") == 1 and str(bad) in run.stderr
        assert listing(tmp_path) == before  # the good library is not written either


# -- the JSON document --------------------------------------------------------------

def test_json_document_shape(library: Path, tmp_path: Path, schema: dict[str, Any]) -> None:
    out = tmp_path / "fixed.so"
    run = fix("--to", "weak-hidden", "-o", out, library)
    assert run.exit_code == 0 and run.document is not None
    document = run.document
    jsonschema.validate(document, schema)
    assert (document["version"], document["mode"], document["dry_run"]) == (1, "weak-hidden",
                                                                             False)
    assert document["refusals"] == [] and document["errors"] == []
    [entry] = document["libraries"]
    assert (entry["path"], entry["destination"], entry["written"]) == (str(library), str(out),
                                                                        True)
    changes = entry["changes"]
    assert [(c["table"], c["index"], c["name"]) for c in changes] == readelf_unique(library)
    assert [c["demangled"] for c in changes] == cxxfilt([c["name"] for c in changes])
    assert {(c["from"], c["to"], c["reason"]) for c in changes} == \
        {("UNIQUE", "WEAK HIDDEN", "no other library of the set uses it")}
    assert all(set(c) == {"table", "index", "name", "demangled", "from", "to", "reason"}
               for c in changes)


def test_json_document_of_a_refusal(tmp_path: Path, schema: dict[str, Any]) -> None:
    folder = cross_pair(tmp_path / "pair")
    run = fix("--strict", "--dry-run", folder / "libbase.so", folder / "libuser.so")
    assert run.exit_code == 1 and run.document is not None
    jsonschema.validate(run.document, schema)
    refusals = {r["name"]: r for r in run.document["refusals"]}
    count = refusals["_ZN8RegistryIiE5countE"]
    assert count["library"] == str(folder / "libbase.so")
    assert count["demangled"] == "Registry<int>::count"
    assert count["referenced_by"] == [str(folder / "libuser.so")]
    assert count["also_defined_by"] == []
    assert "_ZZ15private_countervE5value" not in refusals


def test_json_document_of_errors(tmp_path: Path, schema: dict[str, Any]) -> None:
    missing = tmp_path / "missing.so"
    run = fix("--in-place", missing)
    assert run.exit_code == 2 and run.document is not None
    jsonschema.validate(run.document, schema)
    assert run.document["libraries"] == [] and run.document["mode"] is None
    assert run.document["errors"] == [{"path": str(missing), "error": "no such file or directory"}]


def test_dry_run_text_names_the_symbols_and_writes_nothing(library: Path,
                                                           tmp_path: Path) -> None:
    source = copy_of(library, tmp_path)
    run = fix("--dry-run", source, as_json=False)
    assert run.exit_code == 0, run.stderr
    assert "dry run" in run.stdout and "bump_counter()::count" in run.stdout
    assert listing(tmp_path) == {source.name: library.read_bytes()}


def test_dry_run_json(library: Path, tmp_path: Path, schema: dict[str, Any]) -> None:
    source = copy_of(library, tmp_path)
    run = fix("--dry-run", "--only", "Table", "--exclude", "^_ZGV", source)
    assert run.exit_code == 0 and run.document is not None
    jsonschema.validate(run.document, schema)
    [entry] = run.document["libraries"]
    assert run.document["dry_run"] is True
    assert (entry["destination"], entry["written"]) == (None, False)
    names = {c["name"] for c in entry["changes"]}
    assert names == {"_ZN5TableIiE4sizeE", "_ZN5TableIlE4sizeE", "_ZN5TableIiE4nameB5cxx11E",
                     "_ZN5TableIlE4nameB5cxx11E"}
    skipped = {s["name"] for s in entry["skipped"]}
    assert "_ZGVN5TableIiE4nameB5cxx11E" in skipped and "answer" in skipped
    assert len(entry["changes"]) + len(entry["skipped"]) == len(readelf_unique(source))
    assert listing(tmp_path) == {source.name: library.read_bytes()}


# -- outputs on disk ------------------------------------------------------------------

def test_output_folder_mirrors_the_input_folder(library: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    copy_of(library, tree / "pkg" / "sub", "libone.so")
    copy_of(built_library(VARIANTS["sysv-hash"]), tree / "pkg", "libtwo.so.1")
    (tree / "pkg" / "libtwo.so").symlink_to("libtwo.so.1")
    (tree / "pkg" / "notes.txt").write_text("not ELF\n")
    before = listing(tree)
    out = tmp_path / "out"
    run = fix("-o", out, tree)
    assert run.exit_code == 0, run.stderr
    assert sorted(listing(out)) == ["pkg/libtwo.so.1", "pkg/sub/libone.so"]
    assert listing(tree) == before
    assert {Path(e["destination"]).relative_to(out).as_posix()
            for e in run.document["libraries"]} == {"pkg/sub/libone.so", "pkg/libtwo.so.1"}


def test_several_files_into_an_output_folder(library: Path, tmp_path: Path) -> None:
    one = copy_of(library, tmp_path / "a", "libone.so")
    two = copy_of(built_library(VARIANTS["relr"]), tmp_path / "b", "libtwo.so")
    out = tmp_path / "out"
    out.mkdir()
    assert fix("-o", out, one, two).exit_code == 0
    assert sorted(listing(out)) == ["libone.so", "libtwo.so"]


@pytest.mark.parametrize("target", ["-o", "--in-place"])
def test_a_wheel_is_refused_with_one_line(target: str, library: Path, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl",
                       {"pkg/_native.so": library.read_bytes()})
    before = listing(tmp_path)
    args = ("-o", str(tmp_path / "out")) if target == "-o" else ("--in-place",)
    result = invoke("fix", *args, str(wheel))
    assert result.exception is None, result.exception
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert str(wheel) in result.stderr and "wheel" in result.stderr and "-w" in result.stderr
    assert listing(tmp_path) == before


def test_a_wheel_among_libraries_is_refused(library: Path, tmp_path: Path) -> None:
    source = copy_of(library, tmp_path / "in")
    wheel = make_wheel(tmp_path / "in" / "pkg-1.0-py3-none-any.whl",
                       {"pkg/_native.so": library.read_bytes()})
    before = listing(tmp_path)
    run = fix("--in-place", source, wheel)
    assert run.exit_code == 2 and run.document is not None
    [error] = run.document["errors"]
    assert error["path"].startswith(str(wheel)) and "wheel" in error["error"]
    assert listing(tmp_path) == before


@pytest.mark.parametrize("target", ["-o", "--in-place"])
def test_an_interrupted_write_leaves_the_original(target: str, library: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    source = copy_of(library, tmp_path)
    before = listing(tmp_path)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fix_module, "verify_output", interrupted)
    args = ("-o", str(tmp_path / "out.so")) if target == "-o" else ("--in-place",)
    result = invoke("fix", *args, str(source))
    assert result.exit_code == 130
    assert "interrupted: 0 written, 1 left as they were" in result.stderr
    assert "Traceback" not in result.stderr
    assert listing(tmp_path) == before
    assert temporary_files(tmp_path) == []


def test_two_inputs_for_one_output_are_refused(library: Path, tmp_path: Path) -> None:
    """Two libraries of one name into one folder: the second would replace the first."""
    one = copy_of(library, tmp_path / "a", "libsame.so")
    two = copy_of(built_library(VARIANTS["relr"]), tmp_path / "b", "libsame.so")
    out = tmp_path / "out"
    out.mkdir()
    before = listing(tmp_path)
    run = fix("-o", out, one, two)
    assert run.exit_code == 2 and run.document is not None
    [error] = run.document["errors"]
    assert error["path"] == str(out / "libsame.so")
    assert str(one) in error["error"] and str(two) in error["error"]
    assert listing(tmp_path) == before


def test_json_is_utf8_whatever_the_symbol_names(library: Path, tmp_path: Path) -> None:
    """A name that is not UTF-8 (here 0xff in place of a letter) still gives valid JSON."""
    from click.testing import CliRunner

    from elfpatch.cli import main

    data = bytearray(library.read_bytes())
    name = b"_ZZ12bump_countervE5count\0"
    at = data.find(name)
    while at >= 0:  # in .dynstr and .strtab
        data[at + 5] = 0xFF
        at = data.find(name, at + 1)
    odd = tmp_path / "libodd.so"
    odd.write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["fix", "--json", "--dry-run", str(odd)])
    assert result.exit_code == 0
    document = json.loads(result.stdout_bytes.decode("utf-8"))
    names = {c["name"] for c in document["libraries"][0]["changes"]}
    assert "_ZZ12\\xffump_countervE5count" in names


@pytest.mark.parametrize("kernel", ["no copy_file_range", "copy_file_range refuses"])
def test_the_copy_falls_back_to_reads_and_writes(kernel: str, library: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel cannot copy between the two files, the output is the same."""
    reference = tmp_path / "reference.so"
    assert fix("-o", reference, library).exit_code == 0
    if kernel == "no copy_file_range":
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    else:
        def refuse(*args: object) -> int:
            raise OSError(errno.EXDEV, "Invalid cross-device link")

        monkeypatch.setattr(os, "copy_file_range", refuse)
    output = tmp_path / "fallback.so"
    run = fix("-o", output, library)
    assert run.exit_code == 0, run.stderr
    assert output.read_bytes() == reference.read_bytes()
    assert temporary_files(tmp_path) == []


def test_the_command_line_in_process_leaves_the_signal_handlers_as_it_found_them(
        tmp_path: Path) -> None:
    """A program (or a test runner) that runs ``fix`` in-process keeps its own handlers."""
    import signal

    library = built_library(VARIANTS["default"])
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    assert fix("-o", tmp_path / "out.so", library).exit_code == 0
    assert fix("-w", tmp_path / "wheels", library).exit_code == 2  # not a wheel: refused
    assert {number: signal.getsignal(number) for number in before} == before
