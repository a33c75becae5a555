"""How often `elfpatch inits` is right, against what programs do when they run.

    python benchmarks/inits_truth.py [--elfpatch COMMAND] [--work-dir DIR]

Small multi-TU programs modelled on what real projects do (a factory map
filled by registrations, a path built from another TU's string, a plugin
list reached through a function-local static, ids from a zero-initialized
counter, a logger whose destructor reads another TU's string, a unit table
and a mode check whose constant argument selects a path that reads no other
TU's global, next to a real read of one) and nine modelled on the patterns of
real projects (``MODELLED``: googletest's TEST registry, LLVM's cl::opt,
dmlc-core's registry looked up by a ``std::string``, PyTorch's c10 registry
behind a function-local static pointer, gflags' registry behind a pointer set
under a lock where it is null, looked up under the registry's own lock,
glog/abseil string flags, protobuf's generated descriptor pool looked up by
file name, a Meyers singleton used right, a logger behind a function-local
static used by another global's destructor) are built with
g++ -O2, with and without -flto, in both link orders, and each is also
stripped (``strip --strip-unneeded``).  Each program prints ``BUG=1`` when its
bug struck in that build, or crashes; for the destructor programs, ASan's
``heap-use-after-free`` report at exit is the oracle as well.  An error of
``inits --json`` on a build where the bug struck is a true positive (a
``registration-order`` warning, a look-up that may find nothing, is counted
apart);
precision and recall are counted per build, for init order (and
registrations) and for destruction order.  These programs are not the test
fixtures: they are the measure of what the fixtures taught.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# What a program's bug is about: the order initializers run in (registrations
# included), or the order destructors run in at exit (ASan is its oracle too).
ORDER, DESTRUCTION = "order", "destruction"


@dataclass(frozen=True)
class Program:
    orders: tuple[tuple[str, ...], ...]
    sources: dict[str, str]
    kind: str = ORDER


@dataclass(frozen=True)
class Outcome:
    program: str
    build: str  # link order, -flto or not, stripped or not
    struck: bool  # what the run showed
    errors: int  # what inits reported
    kind: str = ORDER
    # registration-order warnings: a look-up that may find nothing, where the
    # registration is only possible (code not followed to the end may make it)
    cautions: int = 0

PROGRAMS: dict[str, Program] = {
    "dtor": Program(
        orders=(("logger.cpp", "cache.cpp", "main.cpp"), ("cache.cpp", "logger.cpp", "main.cpp")),
        sources={
            "cache.cpp": ("#include <string>\nstd::string cache_name(64, 'c');\n"),
            "logger.cpp": (
                "#include <string>\n"
                "#include <cstdio>\n"
                "extern std::string cache_name;\n"
                "struct Logger {\n"
                "    ~Logger() {\n"
                "        bool fine = cache_name.size() == 64 && cache_name[0] == 'c';\n"
                "        std::printf(\"BUG=%d\\n\", fine ? 0 : 1);\n"
                "    }\n"
                "} logger;\n"
            ),
            "main.cpp": ("int main() { return 0; }\n"),
        },
        kind=DESTRUCTION,
    ),
    "factory": Program(
        orders=(
            ("factory.cpp", "circle.cpp", "square.cpp", "main.cpp"),
            ("circle.cpp", "square.cpp", "factory.cpp", "main.cpp"),
        ),
        sources={
            "circle.cpp": (
                '#include "factory.h"\n'
                "static int make_circle() { return 1; }\n"
                'static bool circle_registered = register_maker("circle", make_circle);\n'
            ),
            "factory.cpp": (
                '#include "factory.h"\n'
                "Factory factory;\n"
                "bool register_maker(const char* key, Maker m) {\n"
                "    factory.makers[key] = m;\n"
                "    return true;\n"
                "}\n"
            ),
            "factory.h": (
                "#include <map>\n"
                "#include <string>\n"
                "#include <functional>\n"
                "using Maker = int (*)();\n"
                "struct Factory { std::map<std::string, Maker> makers; };\n"
                "extern Factory factory;\n"
                "bool register_maker(const char* key, Maker m);\n"
            ),
            "main.cpp": (
                '#include "factory.h"\n'
                "#include <cstdio>\n"
                'int main() { std::printf("BUG=%d\\n", factory.makers.count("square") ? 0 : 1); }\n'
            ),
            "square.cpp": (
                '#include "factory.h"\n'
                "static int make_square() { return 4; }\n"
                'static bool square_registered = register_maker("square", make_square);\n'
            ),
        },
    ),
    "firstuse": Program(
        orders=(
            ("reg.cpp", "a.cpp", "b.cpp", "main.cpp"),
            ("a.cpp", "b.cpp", "reg.cpp", "main.cpp"),
        ),
        sources={
            "a.cpp": ('#include "reg.h"\nstatic bool a_done = (plugins().push_back("a"), true);\n'),
            "b.cpp": ('#include "reg.h"\nstatic bool b_done = (plugins().push_back("b"), true);\n'),
            "main.cpp": (
                '#include "reg.h"\n'
                "#include <cstdio>\n"
                'int main() { std::printf("BUG=%d\\n", plugins().size() == 2 ? 0 : 1); }\n'
            ),
            "reg.cpp": (
                '#include "reg.h"\n'
                "std::vector<std::string>& plugins() {\n"
                "    static std::vector<std::string> list;\n"
                "    return list;\n"
                "}\n"
            ),
            "reg.h": (
                "#include <vector>\n#include <string>\nstd::vector<std::string>& plugins();\n"
            ),
        },
    ),
    "ids": Program(
        orders=(
            ("ids.cpp", "x.cpp", "y.cpp", "main.cpp"),
            ("x.cpp", "y.cpp", "ids.cpp", "main.cpp"),
        ),
        sources={
            "ids.cpp": ("int next_id;\nint allocate_id() { return next_id++; }\n"),
            "main.cpp": (
                "#include <cstdio>\n"
                "extern int x_id, y_id, next_id;\n"
                'int main() { std::printf("BUG=%d\\n", (x_id != y_id && next_id == 2) ? 0 : 1); }\n'
            ),
            "x.cpp": ("int allocate_id();\nint x_id = allocate_id();\n"),
            "y.cpp": ("int allocate_id();\nint y_id = allocate_id();\n"),
        },
    ),
    # A unit table: the case quota.cpp selects never reads units.cpp's string, the
    # others do (a jump table); the program is right in any order.
    "unitcase": Program(
        orders=(
            ("quota.cpp", "scale.cpp", "units.cpp", "main.cpp"),
            ("units.cpp", "scale.cpp", "quota.cpp", "main.cpp"),
        ),
        sources={
            "units.cpp": (
                "#include <string>\n"
                'std::string unit_suffix = std::string("k") + "B";\n'
            ),
            "scale.cpp": (
                "#include <string>\n"
                "extern std::string unit_suffix;\n"
                "__attribute__((noipa)) long scale(int unit) {\n"
                "    switch (unit) {\n"
                "    case 0: return 1;\n"
                "    case 1: return 1000;\n"
                "    case 2: return 1000000;\n"
                "    case 3: return (long)unit_suffix.size();\n"
                "    case 4: return unit_suffix[0] == 'k' ? 1024 : 1;\n"
                "    case 5: return (long)unit_suffix.capacity();\n"
                "    default: return -1;\n"
                "    }\n"
                "}\n"
            ),
            "quota.cpp": ("long scale(int unit);\nlong quota = scale(2) * 5;\n"),
            "main.cpp": (
                "#include <cstdio>\n"
                "extern long quota;\n"
                'int main() { std::printf("BUG=%d\\n", quota == 5000000 ? 0 : 1); }\n'
            ),
        },
    ),
    # A mode chosen by compares and branches: limits.cpp's mode never reads the
    # log prefix; banner.cpp really reads it, and sees it empty when it runs first.
    "modebranch": Program(
        orders=(
            ("limits.cpp", "banner.cpp", "mode.cpp", "prefix.cpp", "main.cpp"),
            ("prefix.cpp", "mode.cpp", "limits.cpp", "banner.cpp", "main.cpp"),
        ),
        sources={
            "prefix.cpp": (
                "#include <string>\n"
                "static std::string build() { std::string p; for (int i = 0; i < 5; ++i)"
                " p += char('A' + i); return p; }\n"
                "std::string log_prefix = build();\n"
            ),
            "mode.cpp": (
                "#include <string>\n"
                "extern std::string log_prefix;\n"
                "__attribute__((noipa)) int limit_for(int mode) {\n"
                "    if (mode == 9) return (int)log_prefix.size();\n"
                "    if (mode < 0) return (int)log_prefix.capacity();\n"
                "    return 64 * mode;\n"
                "}\n"
            ),
            "limits.cpp": ("int limit_for(int mode);\nint max_open = limit_for(2);\n"),
            "banner.cpp": (
                "#include <string>\n"
                "extern std::string log_prefix;\n"
                "std::size_t banner_width = log_prefix.size() + 10;\n"
            ),
            "main.cpp": (
                "#include <cstddef>\n"
                "#include <cstdio>\n"
                "extern int max_open;\n"
                "extern std::size_t banner_width;\n"
                'int main() { std::printf("BUG=%d\\n", (max_open == 128 && banner_width == 15)'
                " ? 0 : 1); }\n"
            ),
        },
    ),
    "siofread": Program(
        orders=(("config.cpp", "paths.cpp", "main.cpp"), ("paths.cpp", "config.cpp", "main.cpp")),
        sources={
            "config.cpp": (
                "#include <cstdlib>\n"
                "#include <string>\n"
                "std::string home_dir =\n"
                '    std::string(getenv("HOME") ? "/home/" : "/root/") + "user";\n'
            ),
            "main.cpp": (
                "#include <string>\n"
                "#include <cstdio>\n"
                "extern std::string cache_dir;\n"
                'int main() { std::printf("BUG=%d\\n", cache_dir == "/.cache" ? 1 : 0); }\n'
            ),
            "paths.cpp": (
                "#include <string>\n"
                "extern std::string home_dir;\n"
                'std::string cache_dir = home_dir + "/.cache";\n'
            ),
        },
    ),
}


# Programs modelled on the patterns of real projects (each multi-TU, each kept as
# small as the pattern allows; the names say which project's pattern).
MODELLED: dict[str, Program] = {
    # googletest: TEST() registers each test from an initializer; here into a global
    # UnitTest whose own constructor runs later in one link order.
    "gtest": Program(
        orders=(
            ("testing.cpp", "math_test.cpp", "string_test.cpp", "main.cpp"),
            ("math_test.cpp", "string_test.cpp", "testing.cpp", "main.cpp"),
        ),
        sources={
            "testing.h": (
                "#include <string>\n#include <vector>\n"
                "struct TestInfo { std::string name; void (*body)(); };\n"
                "struct UnitTest {\n"
                "    std::vector<TestInfo> tests;\n"
                "    UnitTest() { tests.reserve(4); }\n"
                "};\n"
                "extern UnitTest unit_test;\n"
                "bool RegisterTest(const char* name, void (*body)());\n"
                "#define TEST(name) static void name##_body();"
                " static bool name##_registered = RegisterTest(#name, name##_body);"
                " static void name##_body()\n"
            ),
            "testing.cpp": (
                '#include "testing.h"\n'
                "UnitTest unit_test;\n"
                "bool RegisterTest(const char* name, void (*body)()) {\n"
                "    unit_test.tests.push_back({name, body});\n"
                "    return true;\n"
                "}\n"
            ),
            "math_test.cpp": ('#include "testing.h"\nTEST(Adds) {}\nTEST(Subtracts) {}\n'),
            "string_test.cpp": ('#include "testing.h"\nTEST(Concats) {}\n'),
            "main.cpp": (
                '#include "testing.h"\n#include <cstdio>\n'
                'int main() { std::printf("BUG=%d\\n", unit_test.tests.size() == 3 ? 0 : 1); }\n'
            ),
        },
    ),
    # LLVM cl::opt: each option registers itself into a list reached through a
    # function-local static (right in any order); another TU's initializer reads an
    # option's value, which is built by its own TU's initializer.  As LLVM's
    # Option, the constructor clears the option's bitfields and names it through
    # setArgStr, which updates the parser's map of names (built by its own TU's
    # initializer, after the options') only once the option is fully initialized:
    # never while it is built.
    "clopt": Program(
        orders=(
            ("stats.cpp", "passes.cpp", "CommandLine.cpp", "main.cpp"),
            ("passes.cpp", "stats.cpp", "CommandLine.cpp", "main.cpp"),
        ),
        sources={
            "CommandLine.h": (
                "#include <vector>\n"
                "namespace cl {\n"
                "struct Option;\n"
                "std::vector<Option*>& RegisteredOptions();\n"
                "struct Option {\n"
                "    const char* name; int value;\n"
                "    unsigned hidden : 2; unsigned fully_initialized : 1; unsigned misc : 5;\n"
                "    Option(const char* n, int v)\n"
                "        : name(\"\"), value(v), hidden(0), fully_initialized(0), misc(0) {\n"
                "        setArgStr(n);\n"
                "        RegisteredOptions().push_back(this);\n"
                "        fully_initialized = 1;\n"
                "    }\n"
                "    void setArgStr(const char* n);\n"
                "};\n"
                "}\n"
            ),
            "CommandLine.cpp": (
                '#include "CommandLine.h"\n'
                "#include <map>\n#include <string>\n"
                "std::vector<cl::Option*>& cl::RegisteredOptions() {\n"
                "    static std::vector<cl::Option*> options;\n"
                "    return options;\n"
                "}\n"
                "static std::map<std::string, cl::Option*> renamed;\n"
                "void cl::Option::setArgStr(const char* n) {\n"
                "    if (fully_initialized) renamed[n] = this;\n"
                "    name = n;\n"
                "}\n"
            ),
            "passes.cpp": ('#include "CommandLine.h"\ncl::Option Threshold("threshold", 7);\n'),
            "stats.cpp": (
                '#include "CommandLine.h"\n'
                "extern cl::Option Threshold;\n"
                "int limit = Threshold.value * 2;\n"
            ),
            "main.cpp": (
                '#include "CommandLine.h"\n#include <cstdio>\n'
                "extern int limit;\n"
                "int main() {\n"
                '    std::printf("BUG=%d\\n", (limit == 14 && cl::RegisteredOptions().size() == 1)'
                " ? 0 : 1);\n"
                "}\n"
            ),
        },
    ),
    # glog/abseil flags: DEFINE_string defines a std::string flag and registers it
    # (registry behind a function-local static); another TU builds a path from it.
    "flags": Program(
        orders=(
            ("logging.cpp", "log_flags.cpp", "flags.cpp", "main.cpp"),
            ("log_flags.cpp", "logging.cpp", "flags.cpp", "main.cpp"),
        ),
        sources={
            "flags.h": (
                "#include <map>\n#include <string>\n"
                "struct FlagRegisterer { FlagRegisterer(const char* name, std::string* flag); };\n"
                "std::map<std::string, std::string*>& FlagRegistry();\n"
                "#define DEFINE_string(name, value) std::string FLAGS_##name = value;"
                " static FlagRegisterer name##_registerer(#name, &FLAGS_##name)\n"
            ),
            "flags.cpp": (
                '#include "flags.h"\n'
                "std::map<std::string, std::string*>& FlagRegistry() {\n"
                "    static std::map<std::string, std::string*> flags;\n"
                "    return flags;\n"
                "}\n"
                "FlagRegisterer::FlagRegisterer(const char* name, std::string* flag) {\n"
                "    FlagRegistry()[name] = flag;\n"
                "}\n"
            ),
            "log_flags.cpp": ('#include "flags.h"\nDEFINE_string(log_dir, "/var/log/app");\n'),
            "logging.cpp": (
                "#include <string>\n"
                "extern std::string FLAGS_log_dir;\n"
                'std::string log_file = FLAGS_log_dir + "/app.log";\n'
            ),
            "main.cpp": (
                '#include "flags.h"\n#include <cstdio>\n'
                "extern std::string log_file;\n"
                "int main() {\n"
                '    std::printf("BUG=%d\\n", log_file == "/var/log/app/app.log" ? 0 : 1);\n'
                "}\n"
            ),
        },
    ),
    # protobuf: each generated file adds its descriptor to the generated pool (behind a
    # function-local static) under its file name; reflection code looks it up by name.
    "protobuf": Program(
        orders=(
            ("reflection.cpp", "addressbook_pb.cpp", "pool.cpp", "main.cpp"),
            ("addressbook_pb.cpp", "reflection.cpp", "pool.cpp", "main.cpp"),
        ),
        sources={
            "pool.h": (
                "void AddDescriptors(const char* file, const char* data);\n"
                "const char* FindFileByName(const char* file);\n"
            ),
            "pool.cpp": (
                '#include "pool.h"\n#include <map>\n#include <string>\n'
                "struct DescriptorPool { std::map<std::string, const char*> files; };\n"
                "static DescriptorPool& generated_pool() {\n"
                "    static DescriptorPool pool;\n"
                "    return pool;\n"
                "}\n"
                "void AddDescriptors(const char* file, const char* data) {\n"
                "    generated_pool().files[file] = data;\n"
                "}\n"
                "const char* FindFileByName(const char* file) {\n"
                "    auto& files = generated_pool().files;\n"
                "    auto found = files.find(file);\n"
                "    return found == files.end() ? nullptr : found->second;\n"
                "}\n"
            ),
            "addressbook_pb.cpp": (
                '#include "pool.h"\n'
                'static bool added = (AddDescriptors("addressbook.proto", "message Person {}"),'
                " true);\n"
            ),
            "reflection.cpp": (
                '#include "pool.h"\n'
                'static const char* person = FindFileByName("addressbook.proto");\n'
                "const char* person_schema() { return person; }\n"
            ),
            "main.cpp": (
                "#include <cstdio>\n"
                "const char* person_schema();\n"
                'int main() { std::printf("BUG=%d\\n", person_schema() ? 0 : 1); }\n'
            ),
        },
    ),
    # dmlc-core's Registry<T> (xgboost's objectives): entries registered under a
    # std::string from initializers into a function-local static; another TU's
    # initializer finds one with the inlined map look-up (no call is passed a key).
    "dmlc": Program(
        orders=(
            ("plugin.cpp", "objectives.cpp", "registry.cpp", "main.cpp"),
            ("objectives.cpp", "plugin.cpp", "registry.cpp", "main.cpp"),
        ),
        sources={
            "registry.h": (
                "#include <map>\n#include <string>\n#include <vector>\n"
                "struct ObjReg { std::string name; int arity = 0; };\n"
                "struct Registry {\n"
                "    std::vector<ObjReg*> entry_list;\n"
                "    std::map<std::string, ObjReg*> fmap;\n"
                "    static Registry* Get();\n"
                "    ObjReg& Register(const std::string& name);\n"
                "    static const ObjReg* Find(const std::string& name) {\n"
                "        auto& m = Get()->fmap;\n"
                "        auto p = m.find(name);\n"
                "        return p == m.end() ? nullptr : p->second;\n"
                "    }\n"
                "};\n"
            ),
            "registry.cpp": (
                '#include "registry.h"\n'
                "Registry* Registry::Get() { static Registry inst; return &inst; }\n"
                "ObjReg& Registry::Register(const std::string& name) {\n"
                "    auto* e = new ObjReg{name};\n"
                "    fmap[name] = e;\n"
                "    entry_list.push_back(e);\n"
                "    return *e;\n"
                "}\n"
            ),
            "objectives.cpp": (
                '#include "registry.h"\n'
                'static ObjReg& squared = Registry::Get()->Register("reg:squarederror");\n'
                'static ObjReg& logistic = Registry::Get()->Register("reg:logistic");\n'
            ),
            "plugin.cpp": (
                '#include "registry.h"\n'
                'static const bool found = Registry::Find("reg:squarederror") != nullptr;\n'
                "bool plugin_found() { return found; }\n"
            ),
            "main.cpp": (
                "#include <cstdio>\nbool plugin_found();\n"
                'int main() { std::printf("BUG=%d\\n", plugin_found() ? 0 : 1); }\n'
            ),
        },
    ),
    # gflags' FlagRegistry: a pointer the first user sets, under a mutex, where it finds
    # it null; DEFINE_int32 registers through a registerer object, and
    # GetCommandLineOption looks a flag up by name; both take the registry's rwlock.
    "gflags": Program(
        orders=(
            ("probe.cpp", "depth.cpp", "gflags.cpp", "main.cpp"),
            ("depth.cpp", "probe.cpp", "gflags.cpp", "main.cpp"),
        ),
        sources={
            "gflags.h": (
                "#include <string>\n"
                "struct FlagRegisterer { FlagRegisterer(const char* name, int* value); };\n"
                "bool GetCommandLineOption(const char* name, std::string* value);\n"
                "#define DEFINE_int32(name, value) int FLAGS_##name = value;"
                " static FlagRegisterer name##_registerer(#name, &FLAGS_##name)\n"
            ),
            "gflags.cpp": (
                '#include "gflags.h"\n#include <pthread.h>\n#include <cstring>\n'
                "#include <map>\n#include <mutex>\n"
                "namespace {\n"
                "struct CStrLess { bool operator()(const char* a, const char* b) const"
                " { return std::strcmp(a, b) < 0; } };\n"
                "class FlagRegistry {\n"
                " public:\n"
                "    static FlagRegistry* GlobalRegistry() {\n"
                "        static std::mutex creation;\n"
                "        std::lock_guard<std::mutex> hold(creation);\n"
                "        if (!global_registry_) global_registry_ = new FlagRegistry;\n"
                "        return global_registry_;\n"
                "    }\n"
                "    void Register(const char* name, int* value) {\n"
                "        pthread_rwlock_wrlock(&lock_);\n"
                "        flags_[name] = value;\n"
                "        pthread_rwlock_unlock(&lock_);\n"
                "    }\n"
                "    int* Find(const char* name) {\n"
                "        pthread_rwlock_rdlock(&lock_);\n"
                "        auto found = flags_.find(name);\n"
                "        int* value = found == flags_.end() ? nullptr : found->second;\n"
                "        pthread_rwlock_unlock(&lock_);\n"
                "        return value;\n"
                "    }\n"
                " private:\n"
                "    pthread_rwlock_t lock_ = PTHREAD_RWLOCK_INITIALIZER;\n"
                "    std::map<const char*, int*, CStrLess> flags_;\n"
                "    static FlagRegistry* global_registry_;\n"
                "};\n"
                "FlagRegistry* FlagRegistry::global_registry_ = nullptr;\n"
                "}  // namespace\n"
                "FlagRegisterer::FlagRegisterer(const char* name, int* value) {\n"
                "    FlagRegistry::GlobalRegistry()->Register(name, value);\n"
                "}\n"
                "bool GetCommandLineOption(const char* name, std::string* value) {\n"
                "    int* flag = FlagRegistry::GlobalRegistry()->Find(name);\n"
                "    if (flag == nullptr) return false;\n"
                "    *value = std::to_string(*flag);\n"
                "    return true;\n"
                "}\n"
            ),
            "depth.cpp": '#include "gflags.h"\nDEFINE_int32(depth, 5);\n',
            "probe.cpp": (
                '#include "gflags.h"\n'
                "static std::string depth_text;\n"
                'static const bool known = GetCommandLineOption("depth", &depth_text);\n'
                "bool depth_known() { return known; }\n"
            ),
            "main.cpp": (
                "#include <cstdio>\nbool depth_known();\n"
                'int main() { std::printf("BUG=%d\\n", depth_known() ? 0 : 1); }\n'
            ),
        },
    ),
    # c10's C10_DEFINE_REGISTRY (PyTorch): the registry is what a function-local static
    # pointer points to (never destroyed); operators register from initializers, and
    # another TU's initializer looks one up through the pointer the accessor returns.
    "c10": Program(
        orders=(
            ("lookup.cpp", "relu.cpp", "registry.cpp", "main.cpp"),
            ("relu.cpp", "lookup.cpp", "registry.cpp", "main.cpp"),
        ),
        sources={
            "registry.h": (
                "#include <functional>\n#include <memory>\n#include <string>\n"
                "#include <unordered_map>\n"
                "struct Op { virtual ~Op() = default; virtual int run() = 0; };\n"
                "using Creator = std::function<std::unique_ptr<Op>()>;\n"
                "struct Registry {\n"
                "    std::unordered_map<std::string, Creator> registry;\n"
                "    void Register(const std::string& key, Creator creator);\n"
                "    bool Has(const std::string& key) const { return registry.count(key) != 0; }\n"
                "};\n"
                "Registry* OperatorRegistry();\n"
            ),
            "registry.cpp": (
                '#include "registry.h"\n'
                "Registry* OperatorRegistry() {\n"
                "    static Registry* registry = new Registry();\n"
                "    return registry;\n"
                "}\n"
                "void Registry::Register(const std::string& key, Creator creator) {\n"
                "    registry[key] = std::move(creator);\n"
                "}\n"
            ),
            "relu.cpp": (
                '#include "registry.h"\n'
                "struct Relu : Op { int run() override { return 1; } };\n"
                "static bool registered = (OperatorRegistry()->Register(\"Relu\", [] {"
                " return std::unique_ptr<Op>(new Relu); }), true);\n"
            ),
            "lookup.cpp": (
                '#include "registry.h"\n'
                'static const bool has_relu = OperatorRegistry()->Has("Relu");\n'
                "bool relu_known() { return has_relu; }\n"
            ),
            "main.cpp": (
                "#include <cstdio>\nbool relu_known();\n"
                'int main() { std::printf("BUG=%d\\n", relu_known() ? 0 : 1); }\n'
            ),
        },
    ),
    # A Meyers singleton used from other TUs' initializers: right in every order, and
    # nothing may be reported.
    "singleton": Program(
        orders=(
            ("config.cpp", "user_a.cpp", "user_b.cpp", "main.cpp"),
            ("user_b.cpp", "user_a.cpp", "config.cpp", "main.cpp"),
        ),
        sources={
            "config.h": (
                "#include <string>\n"
                "struct Config { std::string name = std::string(\"app-\") + \"main\";"
                " int level = 3; };\n"
                "Config& config();\n"
            ),
            "config.cpp": (
                '#include "config.h"\n'
                "Config& config() { static Config c; return c; }\n"
            ),
            "user_a.cpp": ('#include "config.h"\nint a_level = config().level + 1;\n'),
            "user_b.cpp": ('#include "config.h"\nstd::string b_name = config().name + "-b";\n'),
            "main.cpp": (
                '#include "config.h"\n#include <cstdio>\n'
                "extern int a_level;\nextern std::string b_name;\n"
                'int main() { std::printf("BUG=%d\\n", (a_level == 4 && b_name == "app-main-b")'
                " ? 0 : 1); }\n"
            ),
        },
    ),
    # A logger behind a function-local static, used by another global's destructor:
    # the logger is destroyed first when it was first used after that global was built.
    "exitlog": Program(
        orders=(
            ("startup.cpp", "cache.cpp", "logger.cpp", "main.cpp"),
            ("cache.cpp", "startup.cpp", "logger.cpp", "main.cpp"),
        ),
        sources={
            "logger.h": (
                "#include <string>\n"
                "struct Logger {\n"
                "    bool alive = true;\n"
                "    std::string prefix = std::string(40, 'p');\n"
                "    ~Logger();\n"
                "};\n"
                "Logger& logger();\n"
            ),
            "logger.cpp": (
                '#include "logger.h"\n'
                "Logger::~Logger() { alive = false; }\n"
                "Logger& logger() { static Logger l; return l; }\n"
            ),
            "startup.cpp": (
                '#include "logger.h"\n#include <cstdio>\n'
                'static int started = (std::printf("start %zu\\n", logger().prefix.size()), 0);\n'
            ),
            "cache.cpp": (
                '#include "logger.h"\n#include <cstdio>\n'
                "struct Cache { ~Cache(); } cache;\n"
                "Cache::~Cache() {\n"
                "    Logger& log = logger();\n"
                '    std::printf("BUG=%d\\n", (log.alive && log.prefix.size() == 40) ? 0 : 1);\n'
                "}\n"
            ),
            "main.cpp": ("int main() { return 0; }\n"),
        },
        kind=DESTRUCTION,
    ),
}
PROGRAMS.update(MODELLED)


def run(command: Sequence[str], **options: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False, **options)  # type: ignore[call-overload]


def struck(
    program: Program, folder: Path, order: Sequence[str], flags: list[str], executable: Path
) -> bool:
    """Whether the bug struck in this build: it says so, or it crashes."""
    ran = run([str(executable)])
    if "BUG=1" in ran.stdout or ran.returncode != 0:
        return True
    if program.kind != DESTRUCTION:
        return False
    checked = executable.with_name(executable.name + "_asan")
    run(
        ["g++", "-O1", "-g", "-fsanitize=address", *flags[1:], "-o", str(checked), *order],
        cwd=folder,
    )
    report = run([str(checked)], env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"})
    return "heap-use-after-free" in report.stderr


def findings(elfpatch: list[str], path: Path) -> tuple[int, int]:
    """The errors ``inits`` reports, and its registration-order warnings."""
    document = json.loads(run([*elfpatch, "inits", "--json", str(path)]).stdout)
    risks = [r for f in document["files"] for r in f["risks"]]
    return (sum(r["severity"] == "error" for r in risks),
            sum(r["severity"] == "warning" and r["kind"] == "registration-order" for r in risks))


def measure(name: str, program: Program, work: Path, elfpatch: list[str]) -> list[Outcome]:
    folder = work / name
    folder.mkdir()
    for filename, text in program.sources.items():
        (folder / filename).write_text(text)
    outcomes = []
    for number, order in enumerate(program.orders):
        for flags in (["-O2"], ["-O2", "-flto"]):
            label = f"order {number}{' -flto' if len(flags) > 1 else ''}"
            executable = folder / f"program_{number}_{len(flags)}"
            built = run(["g++", *flags, "-o", str(executable), *order], cwd=folder)
            if built.returncode != 0:
                raise SystemExit(built.stderr)
            seen = struck(program, folder, order, flags, executable)
            stripped = executable.with_name(executable.name + "_stripped")
            shutil.copy(executable, stripped)
            run(["strip", "--strip-unneeded", str(stripped)])
            for path, build in ((executable, label), (stripped, f"{label} stripped")):
                found, cautions = findings(elfpatch, path)
                outcomes.append(Outcome(name, build, seen, found, program.kind, cautions))
    return outcomes


def score(outcomes: Sequence[Outcome]) -> str:
    found = sum(o.struck and o.errors > 0 for o in outcomes)
    false = sum(not o.struck and o.errors > 0 for o in outcomes)
    missed = sum(o.struck and not o.errors for o in outcomes)
    precision = f"{found / (found + false):.2f}" if found + false else "-"
    recall = f"{found / (found + missed):.2f}" if found + missed else "-"
    warned = sum(o.struck and not o.errors and o.cautions > 0 for o in outcomes)
    warned_wrongly = sum(not o.struck and o.cautions > 0 for o in outcomes)
    cautions = (f"; of those missed, {warned} warned that a look-up may find nothing "
                f"({warned_wrongly} such warnings where the bug did not strike)"
                if warned or warned_wrongly else "")
    return (
        f"{len(outcomes)} builds, {found + missed} with the bug: {found} found, "
        f"{false} false, {missed} missed; precision {precision}, recall {recall}{cautions}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--elfpatch",
        default=f"{shlex.quote(sys.executable)} -m elfpatch",
        help="how to run elfpatch (default: this interpreter's)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="where to build, made if missing (default: a temporary folder, removed "
             "afterwards)",
    )
    options = parser.parse_args(argv)
    for tool in ("g++", "strip"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is not installed")
    if options.work_dir is not None:
        options.work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=options.work_dir) as work:
        outcomes = [
            o
            for name, program in PROGRAMS.items()
            for o in measure(name, program, Path(work), shlex.split(options.elfpatch))
        ]
    for outcome in outcomes:
        print(
            f"{outcome.program:12s} {outcome.build:24s} struck={int(outcome.struck)} "
            f"errors={outcome.errors}" + (f" may={outcome.cautions}" if outcome.cautions else "")
        )
    order = [o for o in outcomes if o.kind == ORDER]
    print("init order and registrations:", score(order))
    print("  stripped builds:", score([o for o in order if "stripped" in o.build]))
    print("  -flto builds:", score([o for o in order if "-flto" in o.build]))
    print("destruction order:", score([o for o in outcomes if o.kind == DESTRUCTION]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
