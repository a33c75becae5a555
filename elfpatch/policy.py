"""The ``check`` policy: what fails a build, read from ``[tool.elfpatch]`` in pyproject.toml.

```toml
[tool.elfpatch]
unique = "error"                  # error | warn | ignore   (STB_GNU_UNIQUE definitions)
allow = ["^guard variable for "]  # regexes on demangled names that are always accepted
exit-time-destructors = "warn"    # error | warn | ignore
exit-time-destructors-scope = "all"   # all | read-at-exit (only those a destructor,
                                      # an atexit function or a thread reads)
init-order = "warn"               # error | warn | ignore   (init-order errors found in code)
destruction-order = "warn"        # error | warn | ignore   (destruction-order errors)
max-initializers = { "*/_C*.so" = 40, "*" = 400 }   # budget per library (glob on its path)
cannot-load = "ignore"            # error | warn | ignore   (dlopen would fail: a DT_NEEDED
                                  # or symbol version not found, an undefined symbol)
stays-loaded = "ignore"           # error | warn | ignore   (dlclose leaves it mapped)
hide = ["preset:cxx-instantiations"]  # fix: exports to make LOCAL (regexes on demangled
                                      # names, or a preset)
```

Out of the box only UNIQUE definitions fail the check; the rest warn until
configured, and the two loader rules (which unpack each wheel to ask the
loader model) are off.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elfpatch.errors import InputError
from elfpatch.regular_file import read_regular_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

LEVELS = ("error", "warn", "ignore")
DESTRUCTOR_SCOPES = ("all", "read-at-exit")


@dataclass(frozen=True)
class Policy:
    unique: str = "error"
    allow: tuple[str, ...] = ()
    exit_time_destructors: str = "warn"
    init_order: str = "warn"
    # "read-at-exit": only exit-time destructors of objects read at exit.
    exit_time_destructors_scope: str = "all"
    destruction_order: str = "warn"
    max_initializers: tuple[tuple[str, int], ...] = ()
    cannot_load: str = "ignore"
    stays_loaded: str = "ignore"
    hide: tuple[str, ...] = ()  # for fix: see FixOptions.hide
    source: str | None = None  # the file it was read from
    _compiled: tuple[re.Pattern[str], ...] = field(default=(), compare=False, repr=False)

    @property
    def asks_the_loader(self) -> bool:
        """Whether a rule needs the load and unload verdicts."""
        return self.cannot_load != "ignore" or self.stays_loaded != "ignore"

    def allowed(self, *names: str) -> bool:
        return any(p.search(n) for p in self._compiled for n in names)

    def initializer_budget(self, library: str) -> int | None:
        """The first budget whose glob matches the library's path (or its file name)."""
        name = library.rsplit("/", 1)[-1]
        for pattern, budget in self.max_initializers:
            if fnmatch.fnmatch(library, pattern) or fnmatch.fnmatch(name, pattern):
                return budget
        return None


def _level(table: dict[str, Any], key: str, default: str, source: str,
           choices: tuple[str, ...] = LEVELS) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise InputError(source, f"[tool.elfpatch] {key} = {value!r}: expected one of "
                         f"{', '.join(choices)}")
    return str(value)


def policy_from_table(table: dict[str, Any], source: str) -> Policy:
    known = {"unique", "allow", "exit-time-destructors", "init-order", "max-initializers",
             "exit-time-destructors-scope", "destruction-order", "cannot-load", "stays-loaded",
             "hide"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError(source, f"[tool.elfpatch] has unknown keys: {', '.join(unknown)}",
                         hint=f"known keys: {', '.join(sorted(known))}")
    allow = table.get("allow", [])
    hide = table.get("hide", [])
    if not isinstance(hide, list) or not all(isinstance(h, str) for h in hide):
        raise InputError(source, "[tool.elfpatch] hide must be a list of regular expressions "
                         "or presets")
    budgets = table.get("max-initializers", {})
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise InputError(source, "[tool.elfpatch] allow must be a list of regular expressions")
    if not isinstance(budgets, dict) or not all(isinstance(v, int) for v in budgets.values()):
        raise InputError(source, "[tool.elfpatch] max-initializers must map globs to integers")
    try:
        compiled = tuple(re.compile(pattern) for pattern in allow)
    except re.error as error:
        raise InputError(source, f"[tool.elfpatch] allow: bad regular expression: {error}") \
            from None
    return Policy(
        unique=_level(table, "unique", "error", source),
        allow=tuple(allow),
        exit_time_destructors=_level(table, "exit-time-destructors", "warn", source),
        init_order=_level(table, "init-order", "warn", source),
        exit_time_destructors_scope=_level(table, "exit-time-destructors-scope", "all", source,
                                           DESTRUCTOR_SCOPES),
        destruction_order=_level(table, "destruction-order", "warn", source),
        max_initializers=tuple(budgets.items()),
        cannot_load=_level(table, "cannot-load", "ignore", source),
        stays_loaded=_level(table, "stays-loaded", "ignore", source),
        hide=tuple(hide),
        source=source,
        _compiled=compiled,
    )


def read_policy_file(path: Path) -> Policy:
    try:
        # A FIFO or device given as --config is refused, not waited on.
        document = tomllib.loads(read_regular_text(path))
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(str(path), f"cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(str(path), f"not valid TOML: {error}") from None
    table = document.get("tool", {}).get("elfpatch", document if path.name != "pyproject.toml"
                                         else {})
    return policy_from_table(table, str(path))


def find_pyproject(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_policy(config: str | None, start: Path | None = None) -> Policy:
    """--config FILE, else the nearest pyproject.toml's [tool.elfpatch], else the defaults."""
    if config is not None:
        return read_policy_file(Path(config))
    pyproject = find_pyproject((start or Path.cwd()).resolve())
    return read_policy_file(pyproject) if pyproject else Policy()
