"""The two halves of a verification run side by side, and every failure comes back."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from elfpatch.fixtures import build

from elfpatch.analysis import init_order
from elfpatch.elf.file import ElfFile
from elfpatch.errors import CorruptElfError
from elfpatch.service.parallel import ChildCrashed, run_alongside


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


def test_both_results_come_back() -> None:
    assert run_alongside(lambda: [1, 2], lambda: {"there": (3, "four")}) == \
        ([1, 2], {"there": (3, "four")})


def test_a_result_that_does_not_pickle_is_a_crash() -> None:
    if not hasattr(os, "fork") or threading.active_count() != 1:
        pytest.skip("no fork here: the halves run in this process")
    with pytest.raises(ChildCrashed, match="pickle"):
        run_alongside(lambda: None, lambda: (lambda: None))


def test_effects_shared_out_between_processes_equal_those_of_one(
        cxx: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The split of a big object's initializers between two processes changes nothing."""
    program = build.build_scenario("destruction_order").path("buggy")
    with ElfFile.open(program) as elf:
        alone, _ = init_order.analyse_object(elf, str(program))
    monkeypatch.setattr(init_order, "_PARALLEL_MINIMUM", 2)
    forks: list[int] = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    with ElfFile.open(program) as elf:
        in_turn, _ = init_order.analyse_object(elf, str(program))
    assert forks == [], "below the service layer nothing forks unless told to"
    with ElfFile.open(program) as elf:
        shared, _ = init_order.analyse_object(elf, str(program), alongside=run_alongside)
    assert shared == alone == in_turn and alone.risks
    # Initializers and registered destructors are each shared out when there are enough.
    assert forks or threading.active_count() != 1


POOL_UNDER_ANOTHER_DEFAULT = """
import multiprocessing, os, sys
from elfpatch.service.parallel import worker_pool

multiprocessing.set_start_method(sys.argv[1], force=True)  # what 3.14 does on Linux

def pid_of_worker(job):  # lives in __main__ of a -c script: only a forked worker has it
    return job, os.getpid()

pool = worker_pool(2)
try:
    results = list(pool.map(pid_of_worker, range(4)))
finally:
    pool.shutdown()
assert [job for job, _ in results] == [0, 1, 2, 3]
assert all(pid != os.getpid() for _, pid in results)
print("forked workers")
"""


@pytest.mark.parametrize("default", ["forkserver", "spawn"])
def test_the_pool_forks_whatever_the_default_start_method(default: str) -> None:
    """Workers are forked on every Python (3.14 made forkserver Linux's default):
    they inherit the imported package instead of importing it again."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", POOL_UNDER_ANOTHER_DEFAULT, default],
                         capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout.strip()) == (0, "forked workers"), run.stderr


def test_no_pool_while_other_threads_run() -> None:
    """Forking with threads running can leave a child holding a lock nobody releases."""
    from elfpatch.service.parallel import worker_pool

    assert worker_pool(1) is None
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        assert worker_pool(2) is None
    finally:
        stop.set()
        helper.join()
