"""Human-readable rendering of ``scan`` results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from elfpatch.analysis.unique import KIND_DESCRIPTIONS, FileScan, UniqueKind, UniqueSymbol
from elfpatch.cxx.demangle import demangle
from elfpatch.elf.file import printable
from elfpatch.elf.symbols import DYNSYM
from elfpatch.errors import ElfpatchError

if TYPE_CHECKING:
    from elfpatch.loader.dlopen import LoadVerdict
from elfpatch.report.style import Styler, failed_inputs, plural

# How many symbols a file's summary shows without -v.
TELLING_SYMBOLS = 5


# Without -v, files given one by one that have no UNIQUE symbol get a line each
# up to this many; past it (a folder of them), one line counts them.
CLEAN_FILES_LISTED = 5


def render_scan(scans: list[FileScan], errors: list[ElfpatchError], style: Styler,
                verbose: bool = False) -> str:
    """A block per file with UNIQUE symbols; without -v, one line per wheel (or for the
    loose files) that has none, instead of a block each."""
    shown = scans if verbose else [scan for scan in scans if _telling(scan)]
    blocks = [_render_file(scan, style, verbose) for scan in shown]
    if not verbose:
        clean = [scan for scan in scans if not _telling(scan)]
        lines = _clean_lines(clean, style)
        blocks += ["\n".join(lines)] if lines else []
    blocks.append(_render_summary(scans, errors, style))
    return printable("\n\n".join(blocks) + "\n")


def _telling(scan: FileScan) -> bool:
    """Worth a block of its own: UNIQUE symbols, or the loader cannot load it or keeps it."""
    load = scan.load
    return bool(scan.unique) or (load is not None and (not load.loads or not load.unloads))


def _clean_lines(clean: list[FileScan], style: Styler) -> list[str]:
    by_archive: dict[str, list[FileScan]] = {}
    loose = []
    for scan in clean:
        if scan.member is None:
            loose.append(scan)
        else:
            by_archive.setdefault(scan.path, []).append(scan)
    lines = [style(archive, "head") + ": " + _clean_count(scans, "ELF member", style)
             for archive, scans in by_archive.items()]
    if len(loose) <= CLEAN_FILES_LISTED:
        lines += [style(_title(scan), "head") + ": " + _clean_count([scan], "", style)
                  + _load_words(scan, style) for scan in loose]
    else:
        lines.append(_clean_count(loose, "ELF file", style) + " (-v lists them)")
    return lines


def _clean_count(scans: list[FileScan], noun: str, style: Styler) -> str:
    """``12 ELF members without STB_GNU_UNIQUE symbols`` (just the verdict for one file),
    and how many are kept loaded anyway by DF_1_NODELETE."""
    head = f"{plural(len(scans), noun)} without" if noun else "no"
    text = style(f"{head} STB_GNU_UNIQUE symbols", "good")
    pinned = sum(1 for scan in scans if scan.nodelete)
    if pinned:
        text += (f"; DF_1_NODELETE is set at link time in {plural(pinned, 'of them', 'of them')}"
                 if noun else "; DF_1_NODELETE is set at link time: dlclose never unloads it")
    return text


def _load_words(scan: FileScan, style: Styler) -> str:
    """``; loaded by Python: dlclose unloads it`` (nothing without a verdict)."""
    if scan.load is None:
        return ""
    return "; " + _load_lines(scan.load, style, verbose=False)[0].strip()


def _title(scan: FileScan) -> str:
    where = f"{scan.path}:{scan.member}" if scan.member else scan.path
    return f"{where}  ({scan.machine}, ELF{scan.elf_class}, {scan.elf_type})"


def _render_file(scan: FileScan, style: Styler, verbose: bool) -> str:
    lines = [style(_title(scan), "head")]
    if not scan.unique:
        lines.append("  " + style("no STB_GNU_UNIQUE symbols", "good"))
        if scan.load is not None:
            lines.extend(_load_lines(scan.load, style, verbose))
        elif scan.nodelete:
            lines.append("  DF_1_NODELETE is set at link time: dlclose never unloads it")
        return "\n".join(lines)
    lines.extend(_counts(scan))
    if scan.load is not None:
        lines.extend(_load_lines(scan.load, style, verbose))
    else:
        lines.extend(_runtime_meaning(scan, style))
    shown = list(scan.unique) if verbose else _most_telling(scan.unique)
    label = "symbols:" if verbose else "for example:"
    lines.append(f"  {label}")
    lines.extend(_symbol_line(symbol) for symbol in shown)
    hidden = len(scan.unique) - len(shown)
    if hidden > 0:
        lines.append(style(f"    … and {hidden} more (-v lists all)", "dim"))
    return "\n".join(lines)


def _counts(scan: FileScan) -> list[str]:
    dynamic = [s for s in scan.unique if s.table == DYNSYM]
    static = len(scan.unique) - len(dynamic)
    lines = [f"  {plural(len(dynamic), 'STB_GNU_UNIQUE symbol')} in .dynsym, "
             f"{static} in .symtab"]
    kinds = Counter(s.kind for s in (dynamic or scan.unique))
    for kind, count in kinds.most_common():
        lines.append(f"    {count:6d}  {KIND_DESCRIPTIONS[kind]}")
    types = Counter(s.type for s in (dynamic or scan.unique))
    lines.append("    types: " + ", ".join(f"{n} {t}" for t, n in types.most_common()))
    return lines


def _runtime_meaning(scan: FileScan, style: Styler) -> list[str]:
    definitions = len(scan.dynamic_unique_definitions)
    if not definitions:
        return ["  at load time: none are exported in .dynsym, so the loader ignores them"]
    return [
        "  at load time: " + style(
            f"will not unload on dlclose ({plural(definitions, 'unique definition')})", "bad"),
        "    these symbols bind once per process, even across RTLD_LOCAL: another library "
        "defining one of them shares this copy",
        "    DF_1_NODELETE already set at link time" if scan.nodelete else
        "    (DF_1_NODELETE is not set; the loader sets it when it enters these symbols)",
    ]


def _load_lines(verdict: LoadVerdict, style: Styler, verbose: bool) -> list[str]:
    """One line in the common case: what dlclose does in the host, and the first blocker."""
    from elfpatch.loader.dlopen import DlopenMode, HostKind

    # The hosts known by name, in words.
    words: dict[str, str] = {HostKind.C: "a C program", HostKind.CXX: "a C++ program",
                             HostKind.PYTHON: "Python"}
    mode = " with RTLD_NOW" if verdict.mode == DlopenMode.NOW else ""
    where = f"  loaded by {words.get(verdict.host, verdict.host)}{mode}: "
    if not verdict.loads:
        more = len(verdict.load_errors) - 1
        extra = f" (and {more} more)" if more > 0 else ""
        return [where + style(f"cannot load: {verdict.load_errors[0]}{extra}", "bad")]
    certain = verdict.certain_blockers
    if verdict.unloads or not certain:
        state = "dlclose unloads it" if verdict.unloads else "stays loaded after dlclose"
        lines = [where + style(state, "good" if verdict.unloads else "bad")]
        headline = None
    else:
        headline = certain[0]
        others = f" (+{len(certain) - 1} more, -v lists them)" if len(certain) > 1 else ""
        lines = [where + style("stays loaded after dlclose: " + headline.detail, "bad") + others]
    shown = verdict.blockers if verbose else (() if headline is None else (headline,))
    for blocker in shown:
        if blocker is not headline:
            lines.append(f"    {blocker.detail}")
        if blocker.symbols:
            lines.append(f"      e.g. {', '.join(demangle(n) for n in blocker.symbols[:2])}")
        lines.append(f"      cure: {blocker.cure}")
    return lines


def _most_telling(symbols: Iterable[UniqueSymbol]) -> list[UniqueSymbol]:
    """Exported definitions of real objects first: guard variables repeat their object."""
    ranked = sorted(symbols, key=lambda s: (s.table != DYNSYM, not s.defined,
                                            s.kind == UniqueKind.GUARD_VARIABLE, s.index))
    return ranked[:TELLING_SYMBOLS]


def _symbol_line(symbol: UniqueSymbol) -> str:
    where = "" if symbol.defined else "  (undefined)"
    return (f"    {symbol.table:8s} {symbol.index:7d}  {symbol.type:6s} {symbol.demangled}"
            f"{where}")


def _render_summary(scans: list[FileScan], errors: list[ElfpatchError], style: Styler) -> str:
    judged = [s for s in scans if s.load is not None]
    if judged:
        kept = sum(1 for s in judged if s.unloads_on_dlclose is False)
        refused = sum(1 for s in judged if s.load is not None and not s.load.loads)
        text = (f"{plural(len(scans), 'ELF file')} scanned; of the "
                f"{plural(len(judged), 'library', 'libraries')} the loader was asked about, "
                f"{kept} {'stays' if kept == 1 else 'stay'} loaded after dlclose and "
                f"{refused} cannot load")
    else:
        with_unique = [s for s in scans if s.dynamic_unique_definitions]
        definitions = sum(len(s.dynamic_unique_definitions) for s in scans)
        text = (f"{plural(len(scans), 'ELF file')} scanned: {len(with_unique)} will not unload "
                f"because of STB_GNU_UNIQUE "
                f"({plural(definitions, 'exported unique definition')})")
    if errors:
        text += "; " + style(failed_inputs(errors), "bad")
    return text
