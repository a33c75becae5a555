"""The Python API (``elfpatch.scan``, ``fix``, ``inits``, ``check``), used as a library.

These tests use nothing but the package's top-level names, as a build
backend or a notebook would; the README's example runs from a fresh,
non-editable install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fixlib import VARIANTS, built_library

import elfpatch

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


def test_one_path_is_one_path_in_every_form(library: Path) -> None:
    as_text = elfpatch.scan(str(library))
    assert [f.path for f in as_text.files] == [str(library)]
    assert elfpatch.scan(library).files == as_text.files
    assert elfpatch.scan([library]).files == as_text.files
    assert elfpatch.scan(p for p in [library]).files == as_text.files


def test_a_one_letter_path_is_not_iterated(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """"b.so" was taken as the paths "b", ".", "s", "o" ("." being the current folder)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(elfpatch.ElfpatchError) as raised:
        elfpatch.scan("b.so")
    assert raised.value.path == "b.so"


def test_errors_carry_the_path_and_the_reason(library: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.so"
    with pytest.raises(elfpatch.ElfpatchError) as raised:
        elfpatch.scan([library, missing])
    assert (raised.value.path, raised.value.reason) == (str(missing), "no such file or directory")
    report = elfpatch.scan([library, missing], keep_going=True)
    assert len(report.files) == 1 and [e.path for e in report.errors] == [str(missing)]


@pytest.mark.parametrize("options", [{"mode": "bogus"}, {"only": "("},
                                     {"strict": True, "force": True}])
def test_options_are_checked_when_given(options: dict[str, object], library: Path) -> None:
    with pytest.raises(elfpatch.ElfpatchError):
        elfpatch.fix(library, dry_run=True, **options)  # type: ignore[arg-type]


def test_fix_writes_only_where_asked(library: Path, tmp_path: Path) -> None:
    with pytest.raises(elfpatch.ElfpatchError):
        elfpatch.fix(library)  # no output, no in_place, no dry_run
    result = elfpatch.fix(library, output=tmp_path / "out.so")
    assert [o.written for o in result.outcomes] == [True]
    again = elfpatch.scan(tmp_path / "out.so")
    assert again.files[0].dynamic_unique_definitions == ()


def test_results_are_frozen(library: Path, wheel: Path) -> None:
    import dataclasses

    results = [elfpatch.scan(library), elfpatch.fix(library, dry_run=True),
               elfpatch.inits(library), elfpatch.check(library, config="/dev/null"),
               elfpatch.repair_wheels(wheel, dry_run=True)]
    for result in results:
        for field in dataclasses.fields(result):
            value = getattr(result, field.name)
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(result, field.name, value)
            assert not isinstance(value, (list, dict, set)), (type(result), field.name)


def test_wheels_are_repaired_through_the_api(wheel: Path, tmp_path: Path) -> None:
    with pytest.raises(elfpatch.ElfpatchError):
        elfpatch.repair_wheels(wheel)  # where to?
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    shutil.copy(wheel, fixed / wheel.name)  # an old build where the repaired one will go
    assert not elfpatch.check(fixed / wheel.name, config="/dev/null").passed
    result = elfpatch.repair_wheels(wheel, fixed)
    assert [w.written for w in result.wheels] == [True]
    # Checked, repaired over, checked again in one process: the new wheel's verdict.
    assert elfpatch.check(fixed / wheel.name, config="/dev/null").passed


def _descriptors_on(path: Path) -> list[str]:
    """This process's open descriptors that lead to ``path``."""
    found = []
    for entry in Path("/proc/self/fd").iterdir():
        try:
            if entry.readlink() == path.resolve():
                found.append(entry.name)
        except OSError:
            continue
    return found


def test_no_wheel_stays_open_after_a_call(wheel: Path, tmp_path: Path) -> None:
    """A call reads a wheel's members through one open archive and closes it on return."""
    copy = tmp_path / wheel.name
    shutil.copy(wheel, copy)
    calls = {"scan": lambda: elfpatch.scan(copy), "inits": lambda: elfpatch.inits(copy),
             "check": lambda: elfpatch.check(copy, config="/dev/null")}
    for name, call in calls.items():
        call()
        assert _descriptors_on(copy) == [], f"{name} left the wheel open"
    with pytest.raises(elfpatch.ElfpatchError):
        elfpatch.scan([copy, tmp_path / "missing.so"])
    assert _descriptors_on(copy) == [], "a failing call left the wheel open"


def test_the_closure_starts_from_an_elf_file(tmp_path: Path) -> None:
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    with pytest.raises(elfpatch.ElfpatchError) as raised:
        elfpatch.inits(wheel, closure=True)
    assert "not a wheel" in raised.value.reason


def test_check_takes_a_policy_and_keeps_no_state(library: Path, tmp_path: Path) -> None:
    first = elfpatch.check(library, config="/dev/null")
    assert not first.passed
    fixed = tmp_path / library.name
    elfpatch.fix(library, output=fixed)
    assert elfpatch.check(fixed, config="/dev/null").passed
    shutil.copy(library, fixed)  # the same path, the old content: the old verdict
    assert not elfpatch.check(fixed, config="/dev/null").passed


def test_check_records_a_baseline_and_checks_its_arguments_once(library: Path,
                                                                tmp_path: Path) -> None:
    """What the command line does, the API does: it is one call (``check`` in cli.py)."""
    baseline = tmp_path / "baseline.json"
    recorded = elfpatch.check(library, config="/dev/null", baseline=baseline,
                              update_baseline=True)
    assert recorded.passed and baseline.exists()
    assert all(f.baselined for f in recorded.findings if f.level == "error")
    assert elfpatch.check(library, config="/dev/null", baseline=baseline).passed
    assert not elfpatch.check(library, config="/dev/null").passed
    for arguments, words in (({"update_baseline": True}, "--update-baseline needs"),
                             ({"python": sys.executable}, "--python names the interpreter"),
                             ({"jobs": 0}, "not a positive number")):
        with pytest.raises(elfpatch.ElfpatchError, match=words):
            elfpatch.check(library, config="/dev/null", **arguments)  # type: ignore[arg-type]
    with pytest.raises(elfpatch.ElfpatchError, match="give PATHS, --environment"):
        elfpatch.check([], config="/dev/null")


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"## Python API.*?```python\n(.*?)```", text, re.S)
    assert found, "the README has a Python API example"
    return found.group(1)


def test_the_readme_example_runs_from_a_fresh_install(tmp_path: Path) -> None:
    if not list(Path("/usr/lib").glob("*-linux-gnu/libstdc++.so.6")):
        pytest.skip("the example scans the system's libstdc++.so.6, which is not here "
                    "(apt-get install libstdc++6)")
    installed = tmp_path / "site"
    # Built and installed anew into a folder of its own, not linked to the source
    # tree; its dependencies come from this interpreter.
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(installed), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (tmp_path / "example.py").write_text(readme_example())
    environment = {**os.environ, "PYTHONPATH": str(installed)}
    run = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env=environment)
    assert run.returncode == 0, run.stderr
    assert "UNIQUE definitions" in run.stdout and "error: no-such-file.so" in run.stdout
    where = subprocess.run([sys.executable, "-c", "import elfpatch; print(elfpatch.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True,
                           env=environment).stdout
    assert where.startswith(str(installed))  # the installed copy, not the checkout


def _wheel_of_three_libraries(wheel: Path, destination: Path) -> Path:
    from support.zipcraft import Entry, build, wheel_entries, with_record

    entries = wheel_entries(wheel)
    library = next(e for e in entries if e.decoded_name.endswith(".so"))
    extra = [Entry(library.decoded_name.replace(".so", f"_{i}.so"), library.data)
             for i in range(2)]
    destination.write_bytes(build(with_record([*extra, *entries])))
    return destination


def test_no_wheel_is_kept_open_outside_a_call(wheel: Path) -> None:
    """Only a call owns open wheels: the layers below the API, used outside every call,
    refuse to read a member rather than keep its wheel open with no one to close it."""
    from elfpatch.elf.source import ElfSource, archives_kept_open, open_source
    from elfpatch.service.inputs import split_sources

    with pytest.raises(RuntimeError, match="archives_kept_open"):
        split_sources([str(wheel)])
    with archives_kept_open():
        sources, _errors = split_sources([str(wheel)])
        member = next(s for s in sources if s.member is not None)
        with open_source(member) as elf:
            assert elf.header.machine_name
    assert _descriptors_on(wheel) == []
    with pytest.raises(RuntimeError, match="archives_kept_open"):
        open_source(ElfSource(member.path, member.member, index=member.index))


def test_calls_in_two_threads_keep_their_own_wheels_open(
        wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that ends in another thread closes only the wheels it opened itself.

    One thread's scan is halfway through reading a member when another thread's
    call begins and ends: the member's next bytes still come from an open archive
    (a shared cache closed it, and the member read as "corrupt compressed data").
    """
    import threading

    from elfpatch.wheel.zipread import ZipArchive, ZipMember

    first = _wheel_of_three_libraries(wheel, tmp_path / wheel.name)
    other = tmp_path / "other" / wheel.name
    other.parent.mkdir()
    shutil.copy(wheel, other)
    calls_between: list[int] = []
    real_raw_chunks = ZipArchive.raw_chunks

    def raw_chunks(archive: ZipArchive, member: ZipMember, step: int = 0) -> Iterator[bytes]:
        chunks = real_raw_chunks(archive, member, 512)  # many chunks: room to pause between
        if archive.name == str(first) and not calls_between:
            yield next(chunks)
            thread = threading.Thread(target=lambda: calls_between.append(
                len(elfpatch.inits(other).objects)))
            thread.start()
            thread.join()
        yield from chunks

    monkeypatch.setattr(ZipArchive, "raw_chunks", raw_chunks)
    report = elfpatch.scan(first, loader=False)
    assert calls_between == [1]
    assert (len(report.files), report.errors) == (3, ())
