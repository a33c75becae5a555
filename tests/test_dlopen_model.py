"""The load and unload verdicts of ``loader.dlopen`` equal what glibc does in a real process.

Every library here is built with gcc at test time and opened in a fresh
process of each host (a plain C program, a C++ program that has libstdc++
loaded from the start, the Python interpreter): dlopen(RTLD_LAZY |
RTLD_LOCAL), dlclose, then /proc/self/maps (the probe of
``benchmarks/unload_probe.py``).  The reason is checked with
``LD_DEBUG=bindings``: "marking X as NODELETE due to unique symbol" and
"binding file A to B: normal symbol".  A sample of this machine's own
libraries is held against the probe too.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any, cast

import jsonschema
import pytest
from support.build import compile_linked, invoke, make_wheel, require_tool
from support.probe import build_host, probe
from support.readelf import (
    readelf_relocations,
    readelf_symbols,
    readelf_unique_definitions,
    readelf_versions,
)

import elfpatch
from elfpatch.analysis.check import CheckRule
from elfpatch.analysis.policy import Policy
from elfpatch.loader.dlopen import (
    BlockerKind,
    LoadHost,
    LoadVerdict,
    dlopen_verdict,
)
from elfpatch.service.load import load_verdict

HOSTS = ("c", "c++", "python")
DEBUG = "bindings,files"

FIRST_TO_PROVIDE = r"""
inline int& counter() { static int value = 1; return value; }
extern "C" int get() { return counter(); }
"""

NEVER_LOOKED_UP = r"""
template <class T> struct Holder { static int member; };
template <class T> int Holder<T>::member = 3;
template struct Holder<long>;  // defined UNIQUE, but no code of this library reads it
extern "C" int get() { return 4; }
"""

# gcc -O2 emits std::ctype<char>::do_widen (an inline virtual) as a weak, exported
# definition; libstdc++'s vtable for ctype<char> refers to it.
EXPORTS_STD_INSTANTIATION = r"""
#include <locale>
#include <sstream>
extern "C" int run() {
    std::ostringstream out;
    out << 3 << std::endl;
    return std::use_facet<std::ctype<char>>(std::locale()).widen('a') + (int)out.str().size();
}
"""

PLAIN_C = "int get(void) { return 5; }\n"

THREAD_LOCAL = r"""
#include <cstdio>
struct Noisy { int v = 1; ~Noisy() { std::puts("bye"); } };
thread_local Noisy noisy;
extern "C" int touch() { return noisy.v; }
"""

# The same, but an initializer builds the thread_local while the library loads, through
# an exported function (called through the PLT, as libc10.so's UndefinedTensorImpl does).
THREAD_LOCAL_AT_LOAD = THREAD_LOCAL + r"""
struct Early { Early() { touch(); } } early;
"""

VERSIONED = "int versioned(void) { return 1; }\n"
USES_VERSIONED = "int versioned(void);\nint use(void) { return versioned(); }\n"


@pytest.fixture(scope="session")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    require_tool("gcc")
    require_tool("g++")
    folder = tmp_path_factory.mktemp("hosts")
    return {kind: build_host(kind, folder) for kind in HOSTS}


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every scenario's library, built once."""
    folder = tmp_path_factory.mktemp("dlopen")
    libraries = {
        "first": compile_linked("g++", "c++", folder / "libfirst.so", FIRST_TO_PROVIDE,
                                soname="libfirst.so"),
        "never": compile_linked("g++", "c++", folder / "libnever.so", NEVER_LOOKED_UP,
                                soname="libnever.so"),
        "std": compile_linked("g++", "c++", folder / "libext.so", EXPORTS_STD_INSTANTIATION,
                              soname="libext.so", flags=("-O2",)),
        "nodelete": compile_linked("gcc", "c", folder / "libnodelete.so", PLAIN_C,
                                   soname="libnodelete.so", flags=("-Wl,-z,nodelete",)),
        "plain": compile_linked("gcc", "c", folder / "libplain.so", PLAIN_C,
                                soname="libplain.so"),
        "tls": compile_linked("g++", "c++", folder / "libtls.so", THREAD_LOCAL,
                              soname="libtls.so"),
        "tls_at_load": compile_linked("g++", "c++", folder / "libtlsload.so",
                                      THREAD_LOCAL_AT_LOAD, soname="libtlsload.so"),
    }
    # Two providers of one name (the same source, two SONAMEs) needed by a plain root:
    # the first in the root's local scope enters the name, the second binds to it.
    providers = [compile_linked("g++", "c++", folder / f"lib{n}_dep.so", FIRST_TO_PROVIDE,
                                soname=f"lib{n}_dep.so") for n in ("first", "second")]
    libraries["two_providers"] = compile_linked(
        "gcc", "c", folder / "libtwo.so", PLAIN_C, soname="libtwo.so", needed=providers,
        flags=(f"-Wl,-rpath,{folder}",))
    libraries.update(_cannot_load(folder))
    return libraries


def _cannot_load(folder: Path) -> dict[str, Path]:
    """A library whose DT_NEEDED is gone, and one that needs a version its provider lacks."""
    gone = compile_linked("gcc", "c", folder / "gone" / "libgone.so", PLAIN_C,
                          soname="libgone.so")
    missing_needed = compile_linked("gcc", "c", folder / "libmissing.so", PLAIN_C,
                                    soname="libmissing.so", needed=(gone,))
    shutil.rmtree(gone.parent)
    link_time = folder / "v2"
    link_time.mkdir()
    (link_time / "map").write_text("V2 { global: versioned; local: *; };\n")
    (folder / "map").write_text("V1 { global: versioned; local: *; };\n")
    provider = compile_linked("gcc", "c", link_time / "libprovider.so", VERSIONED,
                              soname="libprovider.so",
                              flags=(f"-Wl,--version-script={link_time / 'map'}",))
    user = compile_linked("gcc", "c", folder / "libversion_user.so", USES_VERSIONED,
                          soname="libversion_user.so", needed=(provider,),
                          flags=("-Wl,-rpath,$ORIGIN",))
    compile_linked("gcc", "c", folder / "libprovider.so", VERSIONED, soname="libprovider.so",
                   flags=(f"-Wl,--version-script={folder / 'map'}",))
    return {"missing_needed": missing_needed, "missing_version": user}


def verdict(library: Path, host: str) -> LoadVerdict:
    return dlopen_verdict(library, LoadHost.named(host))


def assert_matches_loader(library: Path, host: str, hosts: dict[str, list[str]]) -> LoadVerdict:
    real = probe(hosts[host], library)
    predicted = verdict(library, host)
    assert (predicted.loads, predicted.unloads) == (real.loaded, real.unloaded), \
        (real, predicted)
    return predicted


def providers(predicted: LoadVerdict) -> set[str]:
    return {Path(path).name for path in predicted.unique_providers}


def names(paths: tuple[str, ...]) -> set[str]:
    return {Path(path).name for path in paths}


def destroyed(debug: str) -> set[str]:
    """The files LD_DEBUG=files says dlclose unmapped."""
    return {Path(m).name for m in re.findall(r"file=(\S+) \[\d+\];\s+destroying link map",
                                             debug)}


def marked_nodelete(debug: str) -> set[str]:
    """The files LD_DEBUG=bindings says were marked NODELETE for a unique symbol."""
    return {Path(m).name for m in
            re.findall(r"marking (\S+) \[\d+\] as NODELETE due to unique symbol", debug)}


# -- UNIQUE names: the first provider only, and only when looked up ------------------------

@pytest.mark.parametrize("host", HOSTS)
def test_the_first_provider_of_a_unique_name_stays(built: dict[str, Path], host: str,
                                                    hosts: dict[str, list[str]]) -> None:
    library = built["first"]
    assert readelf_unique_definitions(library)
    predicted = assert_matches_loader(library, host, hosts)
    assert predicted.unloads is False
    assert [b.kind for b in predicted.blockers] == [BlockerKind.FIRST_UNIQUE]
    assert predicted.blockers[0].symbols == ("_ZZ7countervE5value",)
    marked = marked_nodelete(probe(hosts[host], library, debug=DEBUG).debug)
    assert "libfirst.so" in marked
    assert providers(predicted) == marked


@pytest.mark.parametrize("host", HOSTS)
def test_the_second_provider_unloads_and_the_first_stays(built: dict[str, Path], host: str,
                                                          hosts: dict[str, list[str]]) -> None:
    library = built["two_providers"]
    predicted = assert_matches_loader(library, host, hosts)
    assert predicted.unloads is True
    debug = probe(hosts[host], library, debug=DEBUG).debug
    marked = marked_nodelete(debug)
    assert "libfirst_dep.so" in marked and "libsecond_dep.so" not in marked
    assert providers(predicted) == marked
    assert re.search(r"binding file \S*libsecond_dep\.so \[0\] to \S*libfirst_dep\.so \[0\]: "
                     r"normal symbol `_ZZ7countervE5value'", debug)
    assert names(predicted.added) - names(predicted.kept) == destroyed(debug)
    assert "libsecond_dep.so" in destroyed(debug)


@pytest.mark.parametrize("host", HOSTS)
def test_a_unique_name_nobody_looks_up_pins_nothing(built: dict[str, Path], host: str,
                                                    hosts: dict[str, list[str]]) -> None:
    library = built["never"]
    assert any(name == "_ZN6HolderIlE6memberE"
               for _index, name in readelf_unique_definitions(library))
    predicted = assert_matches_loader(library, host, hosts)
    assert predicted.unloads is True and predicted.blockers == ()
    marked = marked_nodelete(probe(hosts[host], library, debug=DEBUG).debug)
    assert "libnever.so" not in marked
    assert providers(predicted) == marked


# -- pinned through bindings: the extension first to need libstdc++ ------------------------

@pytest.mark.parametrize("host", ["c", "python"])
def test_an_extension_that_brings_libstdcxx_in_is_pinned_by_it(
        built: dict[str, Path], host: str, hosts: dict[str, list[str]]) -> None:
    library = built["std"]
    predicted = assert_matches_loader(library, host, hosts)
    assert predicted.unloads is False
    blocker, = predicted.blockers
    assert blocker.kind == BlockerKind.BOUND_BY_PINNED
    assert Path(blocker.via or "").name == "libstdc++.so.6"
    assert "_ZNKSt5ctypeIcE8do_widenEc" in blocker.symbols
    debug = probe(hosts[host], library, debug=DEBUG).debug
    assert "libstdc++.so.6" in marked_nodelete(debug)
    assert providers(predicted) == marked_nodelete(debug)
    assert re.search(r"binding file \S*libstdc\+\+\.so\.6 \[0\] to \S*libext\.so \[0\]: "
                     r"normal symbol `_ZNKSt5ctypeIcE8do_widenEc'", debug)


def test_the_same_extension_unloads_in_a_cxx_host(built: dict[str, Path],
                                                  hosts: dict[str, list[str]]) -> None:
    predicted = assert_matches_loader(built["std"], "c++", hosts)
    assert predicted.unloads is True and predicted.kept == ()


# -- other blockers -------------------------------------------------------------------------

@pytest.mark.parametrize("host", HOSTS)
def test_df_1_nodelete_keeps_the_library(built: dict[str, Path], host: str,
                                         hosts: dict[str, list[str]]) -> None:
    predicted = assert_matches_loader(built["nodelete"], host, hosts)
    assert [b.kind for b in predicted.blockers] == [BlockerKind.NODELETE_FLAG]
    assert assert_matches_loader(built["plain"], host, hosts).unloads is True


@pytest.mark.parametrize("host", HOSTS)
def test_thread_local_destructors_are_a_condition_not_a_verdict(
        built: dict[str, Path], host: str, hosts: dict[str, list[str]]) -> None:
    predicted = assert_matches_loader(built["tls"], host, hosts)
    assert predicted.unloads is True
    blocker, = predicted.blockers
    assert blocker.kind == BlockerKind.TLS_DESTRUCTORS and not blocker.certain


@pytest.mark.parametrize("host", HOSTS)
def test_an_initializer_that_builds_a_thread_local_keeps_the_library(
        built: dict[str, Path], host: str, hosts: dict[str, list[str]]) -> None:
    library = built["tls_at_load"]
    real = probe(hosts[host], library)
    predicted = load_verdict(library, LoadHost.named(host))
    assert (predicted.loads, predicted.unloads) == (real.loaded, real.unloaded) == (True, False)
    blocker, = predicted.certain_blockers
    assert blocker.kind == BlockerKind.TLS_DESTRUCTORS
    assert blocker.symbols[-1] == "__cxa_thread_atexit" and "_ZN5EarlyC1Ev" in blocker.symbols
    # The model alone only flags the condition: the initializers decide.
    assert dlopen_verdict(library, LoadHost.named(host)).unloads is True
    assert load_verdict(built["tls"], LoadHost.named(host)).unloads is True


# A destructor that needs the GIL, as a pybind11 module's static py::objects do when
# dlclose runs them: the interpreter aborts ("the GIL is released") when it is not held.
NEEDS_THE_GIL = r"""
void *PyThreadState_Get(void);
__attribute__((destructor)) static void release(void) { PyThreadState_Get(); }
int get(void) { return 5; }
"""


def test_the_python_host_holds_the_gil_through_dlopen_and_dlclose(
        hosts: dict[str, list[str]], tmp_path: Path) -> None:
    """As import does: a library whose destructors touch Python unloads, it does not abort."""
    library = compile_linked("gcc", "c", tmp_path / "libgil.so", NEEDS_THE_GIL,
                             soname="libgil.so")
    real = probe(hosts["python"], library)
    assert (real.loaded, real.unloaded) == (True, True), real.error
    assert verdict(library, "python").unloads is True


# -- cannot load ----------------------------------------------------------------------------

@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize(("scenario", "words"), [
    ("missing_needed", "libgone.so: not found"),
    ("missing_version", "version `V2' not found"),
])
def test_a_library_that_cannot_load_has_no_unload_verdict(
        built: dict[str, Path], host: str, hosts: dict[str, list[str]], scenario: str,
        words: str) -> None:
    real = probe(hosts[host], built[scenario])
    assert not real.loaded
    predicted = verdict(built[scenario], host)
    assert (predicted.loads, predicted.unloads) == (False, None)
    assert any(words in error for error in predicted.load_errors), predicted.load_errors
    assert words.split(":")[0].split("`")[-1].strip("'") in real.error


# -- before and after fix ---------------------------------------------------------------------

@pytest.mark.parametrize("host", HOSTS)
def test_fix_makes_the_first_provider_unload(built: dict[str, Path], host: str,
                                             hosts: dict[str, list[str]],
                                             tmp_path: Path) -> None:
    fixed = tmp_path / "libfirst.so"
    elfpatch.fix(built["first"], output=fixed)
    predicted = assert_matches_loader(fixed, host, hosts)
    assert predicted.unloads is True and predicted.blockers == ()


def test_fix_does_not_free_an_extension_libstdcxx_binds_to(
        built: dict[str, Path], hosts: dict[str, list[str]], tmp_path: Path) -> None:
    fixed = tmp_path / "libext.so"
    elfpatch.fix(built["std"], output=fixed)
    predicted = assert_matches_loader(fixed, "python", hosts)
    assert predicted.unloads is False
    assert [b.kind for b in predicted.blockers] == [BlockerKind.BOUND_BY_PINNED]


# -- this machine's own libraries --------------------------------------------------------------

SYSTEM = Path("/usr/lib/x86_64-linux-gnu")


def system_sample(step: int = 25) -> list[Path]:
    if not SYSTEM.is_dir():
        return []
    files = sorted({p.resolve() for p in SYSTEM.glob("*.so*") if p.is_file()})
    return [f for f in files if _is_elf(f)][::step]


def _is_elf(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(4) == b"\x7fELF"


@pytest.mark.parametrize("host", ["c", "python"])
def test_a_sample_of_system_libraries_matches_the_loader(host: str,
                                                         hosts: dict[str, list[str]]) -> None:
    sample = system_sample()
    if len(sample) < 10:
        pytest.skip(f"{SYSTEM} holds too few libraries for a sample")
    differ = []
    pinned = 0
    for library in sample:
        real = probe(hosts[host], library)
        if real.preloaded or "host exited" in real.error:
            continue  # mapped before dlopen, or a sanitizer runtime ending the process
        predicted = verdict(library, host)
        pinned += real.unloaded is False
        if (predicted.loads, predicted.unloads) != (real.loaded, real.unloaded):
            differ.append((library, real, predicted))
    assert differ == []
    assert pinned, "the sample holds no library that stays: it tests only one answer"


# -- scan and the API --------------------------------------------------------------------------

def scan_schema() -> dict[str, Any]:
    text = resources.files("elfpatch.report").joinpath("scan.schema.json").read_text()
    return cast(dict[str, Any], json.loads(text))


@pytest.fixture(scope="session")
def wheel_members(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
                  ) -> dict[str, bytes]:
    """An extension, one that needs a library of the wheel through $ORIGIN, one that cannot load."""
    folder = tmp_path_factory.mktemp("wheel")
    dep = compile_linked("gcc", "c", folder / "pkg.libs" / "libdep.so", PLAIN_C,
                         soname="libdep.so")
    user = compile_linked("gcc", "c", folder / "pkg" / "libuser.so", PLAIN_C,
                          soname="libuser.so", needed=(dep,),
                          flags=("-Wl,-rpath,$ORIGIN/../pkg.libs",))
    return {"pkg/libext.so": built["std"].read_bytes(), "pkg/libuser.so": user.read_bytes(),
            "pkg.libs/libdep.so": dep.read_bytes(),
            "pkg/libmissing.so": built["missing_needed"].read_bytes()}


def test_scan_of_a_wheel_judges_members_in_python_as_installed(
        wheel_members: dict[str, bytes], hosts: dict[str, list[str]], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl", wheel_members)
    result = invoke("scan", "--json", str(wheel))
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, scan_schema(), cls=jsonschema.Draft202012Validator)
    records = {f["member"]: f for f in document["files"]}
    installed = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(installed)
    for member, record in records.items():
        real = probe(hosts["python"], installed / member)
        assert record["load"]["host"] == "python"
        assert (record["load"]["loads"], record["unloads_on_dlclose"]) == \
            (real.loaded, real.unloaded), member
    assert records["pkg/libuser.so"]["load"]["added"][:2] == ["pkg/libuser.so",
                                                              "pkg.libs/libdep.so"]
    ext = records["pkg/libext.so"]["load"]
    assert [b["kind"] for b in ext["blockers"]] == [BlockerKind.BOUND_BY_PINNED]
    assert "libstdc++.so.6" in ext["blockers"][0]["via"]
    assert records["pkg/libmissing.so"]["unloads_on_dlclose"] is None
    text = invoke("scan", str(wheel)).stdout
    assert "loaded by Python: cannot load: libgone.so: not found" in text
    assert "loaded by Python: stays loaded after dlclose: libstdc++.so.6 stays loaded" in text


def test_scan_takes_a_host(built: dict[str, Path]) -> None:
    library = str(built["std"])
    loose = elfpatch.scan(library).files[0]
    assert loose.load is not None and loose.load.host == "c"
    assert loose.unloads_on_dlclose is False
    in_cxx = elfpatch.scan(library, host="c++").files[0]
    assert in_cxx.unloads_on_dlclose is True
    text = invoke("scan", "--host", "c++", library).stdout
    assert "loaded by a C++ program: dlclose unloads it" in text
    bad = invoke("scan", "--host", "/no/such/program", library)
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1
    assert "no such host program" in bad.stderr
    assert elfpatch.scan(library, loader=False).files[0].load is None


def test_a_musllinux_wheel_never_unloads(built: dict[str, Path], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "pkg-1.0-cp311-cp311-musllinux_1_2_x86_64.whl",
                       {"pkg/libplain.so": built["plain"].read_bytes()})
    record = elfpatch.scan(wheel).files[0]
    assert record.load is not None and record.unloads_on_dlclose is False
    assert [b.kind for b in record.load.blockers] == [BlockerKind.MUSL]


# -- check -----------------------------------------------------------------------------------

def test_check_gates_on_libraries_that_cannot_load_or_stay_loaded(
        wheel_members: dict[str, bytes], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl", wheel_members)
    quiet = elfpatch.check(wheel, policy=Policy(unique="ignore"))
    assert quiet.passed and quiet.findings == []  # the loader rules are off by default
    config = tmp_path / "policy.toml"
    config.write_text('unique = "ignore"\ncannot-load = "error"\nstays-loaded = "warn"\n')
    result = elfpatch.check(wheel, config=config)
    assert not result.passed
    by_rule = {(f.rule, f.library): f for f in result.findings}
    missing = by_rule[(CheckRule.CANNOT_LOAD, "pkg/libmissing.so")]
    assert missing.level == "error" and missing.subject == "libgone.so"
    assert "libgone.so: not found" in missing.message
    pinned = by_rule[(CheckRule.STAYS_LOADED, "pkg/libext.so")]
    assert pinned.level == "warn" and "libstdc++.so.6" in pinned.message
    assert "cure: stop exporting" in pinned.message
    assert {f.library for f in result.findings} == {"pkg/libmissing.so", "pkg/libext.so"}
    text = invoke("check", "--config", str(config), str(wheel))
    assert text.exit_code == 1 and "cannot-load" in text.stdout


# -- fix --hide ----------------------------------------------------------------------------------

# A library that needs std::ctype<char>::do_widen from the set (an asm label makes the
# undefined reference certain, whatever the optimiser inlines).
USES_WIDEN = r"""
#include <locale>
char do_widen(const std::ctype<char>*, char) __asm__("_ZNKSt5ctypeIcE8do_widenEc");
extern "C" int widen() {
    return do_widen(&std::use_facet<std::ctype<char>>(std::locale()), 'a');
}
"""

# An initializer that calls a std:: instantiation of its own library through the PLT:
# hidden as LOCAL alone, lazy binding would look it up by name and fail at load.
CALLS_ITS_INSTANTIATION = r"""
#include <vector>
static std::vector<long> make() {
    std::vector<long> v;
    for (long i = 0; i < 9; ++i) v.push_back(i);
    return v;
}
static std::vector<long> values = make();
extern "C" int run() { return (int)values.size(); }
"""

CALL_RUN = "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).run())"


def test_fix_hide_preset_lets_the_extension_unload_and_keeps_it_working(
        built: dict[str, Path], hosts: dict[str, list[str]], tmp_path: Path) -> None:
    fixed = tmp_path / "libext.so"
    result = elfpatch.fix(built["std"], output=fixed, hide=["preset:cxx-instantiations"])
    changed = {c.name: c for lib in result.plan.libraries for c in lib.changes}
    assert changed["_ZNKSt5ctypeIcE8do_widenEc"].target == "LOCAL HIDDEN"
    assert changed["_ZNKSt5ctypeIcE8do_widenEc"].original == "WEAK"
    assert all(name.startswith(("_ZNKSt", "_ZNSt", "_ZSt", "_ZTV", "_ZTI", "_ZTS", "_ZN9__gnu"))
               for name in changed), sorted(changed)
    for host in ("c", "python"):
        predicted = assert_matches_loader(fixed, host, hosts)
        assert predicted.unloads is True, host
    assert "_ZNKSt5ctypeIcE8do_widenEc" not in {
        s.name for s in readelf_symbols(fixed, use_dynamic=True)
        if s.binding != "LOCAL" and s.ndx != "UND"}
    before = subprocess.run([sys.executable, "-c", CALL_RUN, str(built["std"])],
                            capture_output=True, text=True, check=True).stdout
    after = subprocess.run([sys.executable, "-c", CALL_RUN, str(fixed)],
                           capture_output=True, text=True, check=True).stdout
    assert after == before and int(after) > 0


def test_a_hidden_instantiation_called_through_the_plt_at_load_still_binds(
        hosts: dict[str, list[str]], tmp_path: Path) -> None:
    library = compile_linked("g++", "c++", tmp_path / "libinit.so", CALLS_ITS_INSTANTIATION,
                             soname="libinit.so")
    plt = {r.symbol or "" for r in readelf_relocations(library).entries
           if r.type == "R_X86_64_JUMP_SLOT"}
    assert any(name.startswith("_ZNSt6vectorIlSaIlEE17_M_realloc_insert") for name in plt), plt
    fixed = tmp_path / "fixed.so"
    elfpatch.fix(library, output=fixed, hide=["preset:cxx-instantiations"])
    hidden = {s.name: s for s in readelf_symbols(fixed, use_dynamic=True)}
    realloc = next(s for n, s in hidden.items() if n.startswith("_ZNSt6vectorIlSaIlEE17_M_real"))
    assert (realloc.binding, realloc.visibility) == ("LOCAL", "HIDDEN")
    real = probe(hosts["python"], fixed)
    assert (real.loaded, real.unloaded) == (True, True), real.error
    done = subprocess.run([sys.executable, "-c", CALL_RUN, str(fixed)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "9"


# What manylinux2014's libstdc++_nonshared.a links into every C++ library: the runtime's
# functions newer than the system libstdc++, exported (global). libstdc++ calls them
# through its PLT, so RTLD_NOW binds them to the library that brought libstdc++ in.
NONSHARED_COPIES = r"""
#include <cstddef>
#include <new>
#include <string>
void operator delete(void* p, std::size_t) noexcept { ::operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { ::operator delete[](p); }
extern "C" [[noreturn]] void __cxa_throw_bad_array_new_length() {
    throw std::bad_array_new_length();
}
// The transaction clone of std::logic_error's destructor (nonshared's cow-stdexcept.cc).
extern "C" void logic_error_clone(void*) __asm__("_ZGTtNSt11logic_errorD1Ev");
void logic_error_clone(void*) {}
static std::string built(40, 'x');
extern "C" int run() { return (int)built.size(); }
"""
# The same library replacing the allocator itself: its operator delete stays exported,
# paired with the operator new libstdc++ binds to.
REPLACES_ALLOCATOR = NONSHARED_COPIES + r"""
#include <cstdlib>
void* operator new(std::size_t size) { return std::malloc(size ? size : 1); }
void operator delete(void* p) noexcept { std::free(p); }
"""
ALLOCATION_COPIES = ("_ZdlPvm", "_ZdaPvm", "__cxa_throw_bad_array_new_length")
RUNTIME_COPIES = (*ALLOCATION_COPIES, "_ZGTtNSt11logic_errorD1Ev")


@pytest.mark.parametrize("host", ["c", "python"])
def test_fix_hide_preset_frees_a_library_carrying_the_runtimes_newer_functions(
        host: str, hosts: dict[str, list[str]], tmp_path: Path) -> None:
    library = compile_linked("g++", "c++", tmp_path / "libnonshared.so", NONSHARED_COPIES,
                             soname="libnonshared.so")
    now = dataclasses.replace(LoadHost.named(host), bind_now=True)
    real = probe(hosts[host], library, now=True, debug=DEBUG)
    assert (real.loaded, real.unloaded) == (True, False)
    assert lazily_bound_by(real.debug, "libstdc++.so.6", library) >= {
        "_ZdlPvm", "_ZGTtNSt11logic_errorD1Ev"}
    assert load_verdict(library, now).unloads is False
    fixed = tmp_path / "fixed" / "libnonshared.so"
    fixed.parent.mkdir()
    elfpatch.fix(library, output=fixed, hide=["preset:cxx-instantiations"])
    hidden = {s.name: s for s in readelf_symbols(fixed, use_dynamic=True)}
    for name in RUNTIME_COPIES:
        assert (hidden[name].binding, hidden[name].visibility) == ("LOCAL", "HIDDEN"), name
    after = probe(hosts[host], fixed, now=True)
    assert (after.loaded, after.unloaded) == (True, True), after.error
    assert load_verdict(fixed, now).unloads is True
    done = subprocess.run([sys.executable, "-c", CALL_RUN, str(fixed)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "40"


def test_fix_hide_preset_leaves_a_replaced_allocator_exported(tmp_path: Path) -> None:
    library = compile_linked("g++", "c++", tmp_path / "liballoc.so", REPLACES_ALLOCATOR,
                             soname="liballoc.so")
    plan = elfpatch.fix(library, dry_run=True, hide=["preset:cxx-instantiations"]).plan
    assert plan is not None
    changed = {c.name for lib in plan.libraries for c in lib.changes}
    assert changed.isdisjoint(ALLOCATION_COPIES), changed
    assert "_ZGTtNSt11logic_errorD1Ev" in changed


def test_fix_hide_keeps_what_another_library_of_the_set_references(
        hosts: dict[str, list[str]], tmp_path: Path) -> None:
    """An instantiation libstdc++ does not export (std::vector<long>'s), which another
    library of the set takes the address of: hidden, that library would not load."""
    folder = tmp_path / "set"
    provider = compile_linked("g++", "c++", folder / "libinit.so", CALLS_ITS_INSTANTIATION,
                              soname="libinit.so")
    name = next(s.name for s in readelf_symbols(provider, use_dynamic=True)
                if s.name.startswith("_ZNSt6vectorIlSaIlEE17_M_realloc_insert"))
    user = compile_linked("g++", "c++", folder / "libuser.so",
                          f'extern "C" void instantiation() __asm__("{name}");\n'
                          'extern "C" void* address() { return (void*)&instantiation; }\n',
                          soname="libuser.so", needed=(provider,),
                          flags=("-Wl,-rpath,$ORIGIN",))
    result = invoke("fix", "--json", "--in-place", "--hide", "preset:cxx-instantiations",
                    str(provider), str(user))
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    records = {Path(r["path"]).name: r for r in document["libraries"]}
    kept = {k["name"]: k["reason"] for k in records["libinit.so"]["kept_exported"]}
    assert "libuser.so" in kept[name]
    assert probe(hosts["c"], user).loaded


def test_fix_hide_reads_pyproject_and_refuses_a_bad_pattern(built: dict[str, Path],
                                                            tmp_path: Path) -> None:
    bad = invoke("fix", "--dry-run", "--hide", "preset:nothing", str(built["std"]))
    assert bad.exit_code == 2 and "not a preset" in bad.stderr
    assert bad.stderr.count("\n") == 1
    bad = invoke("fix", "--dry-run", "--hide", "(", str(built["std"]))
    assert bad.exit_code == 2 and "not a regular expression" in bad.stderr
    (tmp_path / "pyproject.toml").write_text(
        '[tool.elfpatch]\nhide = ["preset:cxx-instantiations"]\n')
    library = tmp_path / "libext.so"
    shutil.copy(built["std"], library)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        result = invoke("fix", "--dry-run", "--json", str(library))
    assert result.exit_code == 0, result.stderr
    changes = json.loads(result.stdout)["libraries"][0]["changes"]
    assert any(c["name"] == "_ZNKSt5ctypeIcE8do_widenEc" and c["from"] == "WEAK"
               for c in changes)
    jsonschema.validate(json.loads(result.stdout), _schema("fix.schema.json"),
                        cls=jsonschema.Draft202012Validator)


def _schema(name: str) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(
        resources.files("elfpatch.report").joinpath(name).read_text()))


def test_the_preset_leaves_the_cxx_runtime_itself_alone(tmp_path: Path) -> None:
    runtime = SYSTEM / "libstdc++.so.6"
    if not runtime.exists():
        pytest.skip(f"{runtime} is not on this machine")
    copy = tmp_path / "libstdc++.so.6"
    shutil.copy(runtime.resolve(), copy)
    plan = elfpatch.fix(copy, dry_run=True, hide=["preset:cxx-instantiations"]).plan
    assert plan is not None
    assert [c for lib in plan.libraries for c in lib.changes if c.original != "UNIQUE"] == []


@pytest.mark.parametrize("host", HOSTS)
def test_rtld_now_as_python_imports(built: dict[str, Path], host: str,
                                    hosts: dict[str, list[str]]) -> None:
    """dlopen(RTLD_NOW) binds function slots at load too: the model follows with bind_now."""
    chosen = dataclasses.replace(LoadHost.named(host), bind_now=True)
    for name in ("first", "never", "std", "two_providers", "tls", "missing_version"):
        real = probe(hosts[host], built[name], now=True)
        predicted = dlopen_verdict(built[name], chosen)
        assert (predicted.loads, predicted.unloads) == (real.loaded, real.unloaded), name


# A thread_local reached from an initializer only on an error path (a fatal log stream,
# then a throw): a library that loads never took it, so nothing is registered.
THREAD_LOCAL_ON_ERROR_PATH = r"""
#include <sstream>
#include <stdexcept>
struct Entry { std::ostringstream log; };
__attribute__((noinline)) Entry& entry() { thread_local Entry e; return e; }
__attribute__((noinline)) void fatal() { throw std::runtime_error(entry().log.str()); }
__attribute__((noinline)) int parameter(int v) {
    if (v < 0) { entry().log << "negative " << v; fatal(); }
    return v * 2;
}
static int value = parameter(21);
extern "C" int run() { return value; }
"""


@pytest.mark.parametrize("host", HOSTS)
def test_a_thread_local_built_only_on_an_error_path_does_not_keep_the_library(
        tmp_path: Path, host: str, hosts: dict[str, list[str]]) -> None:
    library = compile_linked("g++", "c++", tmp_path / "liberror.so", THREAD_LOCAL_ON_ERROR_PATH,
                             soname="liberror.so", flags=("-O2",))
    assert "__cxa_thread_atexit" in {s.name for s in readelf_symbols(library)}
    real = probe(hosts[host], library)
    predicted = load_verdict(library, LoadHost.named(host))
    assert (predicted.loads, predicted.unloads) == (real.loaded, real.unloaded)
    if host != "c++":
        return  # libstdc++, brought in by it, binds to it: pinned for that reason
    assert real.unloaded
    tls = [b for b in predicted.blockers if b.kind == BlockerKind.TLS_DESTRUCTORS]
    assert tls and not tls[0].certain  # a condition (a thread that builds one), not a pin


# libstdc++'s own calls to std::string members go through its PLT, bound lazily on the
# first call; this extension exports those members and its initializer makes libstdc++
# call them (ostringstream::str), so a pinned libstdc++ binds to it while it loads.
BINDS_WHILE_LOADING = r"""
#include <sstream>
#include <string>
template class std::__cxx11::basic_string<char>;
static std::string built = [] {
    std::ostringstream out;
    out << "a string longer than the small buffer, " << 42;
    return out.str();
}();
extern "C" int run() { return (int)built.size(); }
"""


@pytest.fixture(scope="session")
def binds_while_loading(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lazy")
    return compile_linked("g++", "c++", folder / "libstring.so", BINDS_WHILE_LOADING,
                          soname="libstring.so", flags=("-O2",))


def lazily_bound_by(debug: str, holder: str, library: Path) -> set[str]:
    """The symbols LD_DEBUG=bindings says ``holder`` bound to ``library``."""
    pattern = rf"binding file \S*{re.escape(holder)} \[0\] to {re.escape(str(library))} " \
              r"\[0\]: normal symbol `([^']+)'"
    return set(re.findall(pattern, debug))


@pytest.mark.parametrize("host", HOSTS)
def test_lazy_slots_bound_while_initializers_run_pin_the_library(
        binds_while_loading: Path, host: str, hosts: dict[str, list[str]],
        tmp_path: Path) -> None:
    library = binds_while_loading
    real = probe(hosts[host], library, debug=DEBUG)
    bound = lazily_bound_by(real.debug, "libstdc++.so.6", library)
    runtime = SYSTEM / "libstdc++.so.6"
    if not runtime.exists():
        pytest.skip(f"{runtime} is not on this machine")
    lazy_slots = {r.symbol for r in readelf_relocations(runtime).entries
                  if r.type == "R_X86_64_JUMP_SLOT"}
    predicted = load_verdict(library, LoadHost.named(host))
    assert (predicted.loads, predicted.unloads) == (real.loaded, real.unloaded)
    if host == "c++":  # libstdc++ was loaded at start: its lookups never see the library
        assert real.unloaded and not bound
        return
    # libstdc++ bound some of its own lazy slots to the library while it loaded.
    assert bound and lazy_slots >= bound
    assert not real.unloaded
    blocker = next(b for b in predicted.blockers if b.kind == BlockerKind.BOUND_BY_PINNED)
    assert blocker.via is not None and blocker.via.endswith("libstdc++.so.6")
    assert set(blocker.symbols) & bound
    # The preset hides the instantiations; the library then unloads and still works.
    fixed = tmp_path / "libstring.so"
    elfpatch.fix(library, output=fixed, hide=["preset:cxx-instantiations"])
    after = probe(hosts[host], fixed)
    assert after.unloaded and load_verdict(fixed, LoadHost.named(host)).unloads
    done = subprocess.run([sys.executable, "-c", CALL_RUN, str(fixed)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == str(len("a string longer than the small buffer, 42"))


# The library exports its own copy of a throw helper libstdc++ calls through its PLT,
# but only where reserve() is asked for too much: the initializer never takes that path.
EXPORTS_A_THROW_HELPER = r"""
#include <stdexcept>
#include <string>
namespace std {
void __throw_length_error(const char* what) { throw std::length_error(what); }
}
static std::string built = [] {
    std::string text;
    text.reserve(100);
    return text + "ok";
}();
extern "C" int run() { return (int)built.size(); }
"""


@pytest.mark.parametrize("host", HOSTS)
def test_a_throw_helper_the_runtime_calls_only_on_error_binds_nothing_at_load(
        tmp_path: Path, host: str, hosts: dict[str, list[str]]) -> None:
    library = compile_linked("g++", "c++", tmp_path / "libthrow.so", EXPORTS_A_THROW_HELPER,
                             soname="libthrow.so", flags=("-O2",))
    exported = {s.name for s in readelf_symbols(library) if s.binding == "GLOBAL"}
    assert "_ZSt20__throw_length_errorPKc" in exported
    real = probe(hosts[host], library, debug=DEBUG)
    assert not lazily_bound_by(real.debug, "libstdc++.so.6", library)
    predicted = load_verdict(library, LoadHost.named(host))
    assert (predicted.loads, predicted.unloads) == (real.loaded, real.unloaded) == (True, True)


# A pinned dependency (first provider of a UNIQUE name) that calls back into the library
# that needs it, through a lazy PLT slot only: RTLD_LAZY binds nothing, RTLD_NOW binds it.
CALLS_BACK = FIRST_TO_PROVIDE + r"""
extern "C" int callback();
extern "C" int use() { return callback() + get(); }
"""
CALLED_BACK = "int callback(void) { return 6; }\n"


@pytest.fixture(scope="session")
def called_back(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("now")
    pinned = compile_linked("g++", "c++", folder / "libcaller.so", CALLS_BACK,
                            soname="libcaller.so")
    return compile_linked("gcc", "c", folder / "libcallee.so", CALLED_BACK,
                          soname="libcallee.so", needed=(pinned,),
                          flags=(f"-Wl,-rpath,{folder}",))


def test_check_and_scan_take_the_host_and_rtld_now(
        built: dict[str, Path], called_back: Path, hosts: dict[str, list[str]],
        tmp_path: Path) -> None:
    """check --host/--now and scan --now, held against the real loader in a C host."""
    lazy, now = probe(hosts["c"], called_back), probe(hosts["c"], called_back, now=True)
    assert (lazy.unloaded, now.unloaded) == (True, False)  # the scenario is what it claims
    config = tmp_path / "policy.toml"
    config.write_text('unique = "ignore"\nstays-loaded = "error"\n')
    library = str(called_back)
    assert elfpatch.check(library, config=config).passed
    held = elfpatch.check(library, config=config, now=True)
    assert [f.rule for f in held.findings] == [CheckRule.STAYS_LOADED]
    assert "libcaller.so" in held.findings[0].message
    assert invoke("check", "--config", str(config), library).exit_code == 0
    assert invoke("check", "--config", str(config), "--now", library).exit_code == 1
    assert elfpatch.scan(library).files[0].unloads_on_dlclose is True
    assert elfpatch.scan(library, now=True).files[0].unloads_on_dlclose is False
    document = json.loads(invoke("scan", "--json", "--now", library).stdout)
    record = document["files"][0]
    assert record["unloads_on_dlclose"] is False and record["load"]["mode"] == "RTLD_NOW"
    jsonschema.validate(document, scan_schema())
    assert "loaded by a C program with RTLD_NOW: stays loaded" in invoke(
        "scan", "--now", library).stdout
    # The host: a C++ program has libstdc++ loaded already, so the extension unloads there.
    extension = str(built["std"])
    assert probe(hosts["c++"], extension).unloaded and not probe(hosts["c"], extension).unloaded
    assert not elfpatch.check(extension, config=config).passed
    assert elfpatch.check(extension, config=config, host="c++").passed
    assert invoke("check", "--config", str(config), "--host", "c++", extension).exit_code == 0
    assert invoke("check", "--config", str(config), "--host", "c", extension).exit_code == 1
    bad = invoke("check", "--config", str(config), "--host", "/no/such/program", extension)
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1


def test_a_reference_to_the_runtimes_version_does_not_keep_an_instantiation(
        built: dict[str, Path], hosts: dict[str, list[str]], tmp_path: Path) -> None:
    """A user linked against libstdc++ first asks for GLIBCXX_3.4's do_widen: hidden in
    the extension, its reference binds to libstdc++'s copy, so the set analysis hides it."""
    runtime = SYSTEM / "libstdc++.so.6"
    if not runtime.exists():
        pytest.skip(f"{runtime} is not on this machine")
    folder = tmp_path / "set"
    folder.mkdir()
    provider = folder / "libext.so"
    shutil.copy(built["std"], provider)
    user = compile_linked("g++", "c++", folder / "libwiden.so", USES_WIDEN,
                          soname="libwiden.so", needed=(runtime.resolve(), provider),
                          flags=("-Wl,-rpath,$ORIGIN",))
    assert ("libstdc++.so.6", "GLIBCXX_3.4", False) in readelf_versions(user).needed
    result = elfpatch.fix([provider, user], dry_run=True, hide=["preset:cxx-instantiations"])
    assert result.plan is not None
    ext = next(lib for lib in result.plan.libraries if lib.label.endswith("libext.so"))
    assert "_ZNKSt5ctypeIcE8do_widenEc" in {c.name for c in ext.changes}
    assert ext.kept_exported == ()
    elfpatch.fix([provider, user], in_place=True, hide=["preset:cxx-instantiations"])
    assert probe(hosts["c"], user).loaded
    done = subprocess.run([sys.executable, "-c", "import ctypes, sys; "
                           "print(ctypes.CDLL(sys.argv[1]).widen())", str(user)],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(ord("a"))
