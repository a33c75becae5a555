"""Functions the analysis knows by name (``effects.names``), matched against the names
g++ itself gives them: abseil's lock slow paths and the loggers' messages built with
a severity.  Each is declared as its library declares it, compiled, and read back."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.build import compile_linked
from support.readelf import readelf_symbols

from elfpatch.analysis.effects.names import fatal_message, runs_only_contended

# abseil's Mutex and SpinLock, under its versioned inline namespace (as a release
# ships them) or none (as older releases and some vendored copies do).
_ABSEIL = """
namespace absl {
INLINE namespace lts_20260526 {
struct Condition;
struct SynchWaitParams;
class Mutex {
 public:
  struct MuHowS;
  typedef const MuHowS* MuHow;
  void lock();
  void unlock();
  void LockSlow(MuHow how, const Condition* cond, int flags);
  void UnlockSlow(SynchWaitParams* waitp);
  void LockSlowLoop(SynchWaitParams* waitp, int flags);
};
void Mutex::lock() {}
void Mutex::unlock() {}
void Mutex::LockSlow(MuHow, const Condition*, int) {}
void Mutex::UnlockSlow(SynchWaitParams*) {}
void Mutex::LockSlowLoop(SynchWaitParams*, int) {}
namespace base_internal {
class SpinLock {
 public:
  void lock();
  void SlowLock();
  void SlowUnlock(unsigned lock_value);
};
void SpinLock::lock() {}
void SpinLock::SlowLock() {}
void SpinLock::SlowUnlock(unsigned) {}
}
}
}
"""
_CONTENDED = {"absl::Mutex::LockSlow", "absl::Mutex::UnlockSlow",
              "absl::base_internal::SpinLock::SlowLock",
              "absl::base_internal::SpinLock::SlowUnlock"}

# The three loggers, with their severity types as the libraries declare them
# (glog's an int before 0.7, an enum since).
_LOGGERS = """
#include <ostream>
namespace google {
#ifdef GLOG_ENUM
enum LogSeverity : int { GLOG_INFO, GLOG_WARNING, GLOG_ERROR, GLOG_FATAL };
#else
typedef int LogSeverity;
#endif
class LogMessage { public: LogMessage(const char*, int, LogSeverity); ~LogMessage(); };
LogMessage::LogMessage(const char*, int, LogSeverity) {}
LogMessage::~LogMessage() {}
}
namespace arrow { namespace util {
enum class ArrowLogLevel : int { ARROW_DEBUG = -1, ARROW_INFO, ARROW_WARNING, ARROW_ERROR,
                                 ARROW_FATAL };
class ArrowLog { public: ArrowLog(const char*, int, ArrowLogLevel); ~ArrowLog(); };
ArrowLog::ArrowLog(const char*, int, ArrowLogLevel) {}
ArrowLog::~ArrowLog() {}
} }
namespace ray {
enum class RayLogLevel { TRACE = -2, DEBUG, INFO, WARNING, ERROR, FATAL };
class RayLog { public: RayLog(const char*, int, RayLogLevel); ~RayLog(); };
RayLog::RayLog(const char*, int, RayLogLevel) {}
RayLog::~RayLog() {}
}
"""


def _functions(folder: Path, name: str, source: str, *flags: str) -> dict[str, str]:
    """Mangled -> demangled (without parameters) names of the functions ``source``
    defines, as g++ names them."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not installed (apt-get install g++)")
    library = compile_linked(compiler, "c++", folder / name, source, soname=name,
                             flags=flags)
    mangled = sorted({symbol.name for symbol in readelf_symbols(library)
                      if symbol.type == "FUNC" and symbol.name.startswith("_ZN")})
    demangled = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True,
                               text=True, check=True).stdout.splitlines()
    return {name: text.partition("(")[0].replace("lts_20260526::", "")
            for name, text in zip(mangled, demangled, strict=True)}


@pytest.mark.parametrize("namespace", ["inline", ""])
def test_the_lock_slow_paths_are_the_four_abseil_declares_cold(namespace: str,
                                                                tmp_path: Path) -> None:
    source = _ABSEIL.replace("INLINE", namespace)
    names = _functions(tmp_path, f"libabsl{namespace}.so", source)
    contended = {path for mangled, path in names.items() if runs_only_contended(mangled)}
    assert contended == _CONTENDED, names
    assert "absl::Mutex::lock" in names.values()  # the fast paths are followed


@pytest.mark.parametrize("flags", [(), ("-DGLOG_ENUM",)])
def test_a_logger_message_is_fatal_only_with_the_fatal_severity(
        flags: tuple[str, ...], tmp_path: Path) -> None:
    names = _functions(tmp_path, f"liblog{len(flags)}.so", _LOGGERS, *flags)
    constructors = [mangled for mangled, path in names.items()
                    if path.endswith(("LogMessage::LogMessage", "ArrowLog::ArrowLog",
                                      "RayLog::RayLog"))]
    assert len(constructors) == 6, names  # complete and base, each
    for mangled in constructors:
        assert fatal_message(mangled, ((3, 3),))
        assert not fatal_message(mangled, ((3, 1),))  # a warning returns
        assert not fatal_message(mangled, ((2, 3),))  # a line number 3 is no severity
    destructors = [m for m, path in names.items() if "~" in path]
    assert destructors and not any(fatal_message(m, ((3, 3),)) for m in destructors)
