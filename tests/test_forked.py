"""The two halves of a verification run side by side, and every failure comes back."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from elfpatch.errors import CorruptElfError
from elfpatch.patch.forked import ChildCrashed, run_alongside


def test_both_halves_run(tmp_path: Path) -> None:
    marker = tmp_path / "there"
    seen: list[str] = []
    run_alongside(lambda: seen.append("here"), marker.touch)
    assert seen == ["here"] and marker.exists()


def test_an_error_of_the_child_is_raised_here() -> None:
    def there() -> None:
        raise CorruptElfError("lib.so", "chains do not end where they should")

    with pytest.raises(CorruptElfError, match="chains do not end"):
        run_alongside(lambda: None, there)


def test_a_crash_of_the_child_is_not_a_pass() -> None:
    with pytest.raises(ChildCrashed, match="ZeroDivisionError"):
        run_alongside(lambda: None, lambda: print(1 // 0))


def test_a_child_that_dies_silently_is_not_a_pass() -> None:
    if not hasattr(os, "fork") or threading.active_count() != 1:
        pytest.skip("no fork here: the halves run in this process")
    with pytest.raises(ChildCrashed, match="no report"):
        run_alongside(lambda: None, lambda: os._exit(3))


def test_an_error_here_wins_and_leaves_no_child() -> None:
    def here() -> None:
        raise CorruptElfError("lib.so", "here first")

    with pytest.raises(CorruptElfError, match="here first"):
        run_alongside(here, lambda: None)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # every child was reaped


def test_with_other_threads_running_both_halves_run_here() -> None:
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        seen: list[str] = []
        run_alongside(lambda: seen.append("here"), lambda: seen.append("there"))
        assert seen == ["here", "there"]
    finally:
        stop.set()
        worker.join()
