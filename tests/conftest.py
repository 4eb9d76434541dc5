import os
from pathlib import Path

import pytest

try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # a bare host (tests/gpu on a GPU machine): one test at a time, `-o addopts=""`
    LoadFileScheduling = None

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "vllm-0.32.0-cpu"


@pytest.fixture
def fixtures_dir() -> Path:
    """Recorded vLLM 0.32 output, part of the repository (tests/fixtures/README.md): never skipped."""
    return FIXTURES


if os.environ.get("PYTEST_XDIST_WORKER"):
    # A pytest-xdist worker talks to the controller from a thread of its own; gevent's monkey patching (which
    # importing locust does) turns the worker's locks into greenlet locks that thread cannot wake, and the
    # worker dies ("LoopExit: This operation would block forever"). The tests that import locust run its
    # gevent code unpatched; Locust itself always runs in subprocesses, patched as usual (the variable is
    # gone again before any test starts one).
    os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
    import locust  # noqa: F401  (imported once, unpatched)
    del os.environ["LOCUST_SKIP_MONKEY_PATCH"]
    # Several sweeps share this host's CPUs at once: pinned by placement auto they would all put their servers
    # on the same CPU and their Locusts on another. The OS schedules them instead, except in the tests of
    # placement itself (tests/e2e/test_cpu_placement.py lifts this).
    os.environ["LOOKAHEAD_RUNNER_PLACEMENT"] = "off"


# Seconds of the longest end-to-end files run one at a time on a quiet 2-core host (--durations, 2026-12-02), and
# "timed" where a test asserts what a measurement says (which K wins, how many lives it took, a window valid, a
# pre-flight's lag): a host crowded by other sweeps can turn those by starving their Locust.
E2E_FILES = {
    "test_workload_variants_sim.py": (189, "timed"), "test_repeat_mode.py": (142, "timed"),
    "test_confirm_sim.py": (119, "timed"), "test_runner_lives.py": (107, "timed"),
    "test_fault_settings.py": (104, ""), "test_adaptive_sim.py": (95, "timed"),
    "test_missing_telemetry.py": (90, "timed"), "test_fault_signals.py": (89, ""), "test_fault_env.py": (86, ""),
    "test_secret_args.py": (52, ""), "test_cpu_placement.py": (51, "timed"), "test_sweep_sim.py": (43, "timed"),
    "test_spec_key_grid.py": (36, ""),
}
UNLISTED_E2E_S = 30
MAX_TIMED_FILES_AT_ONCE = 2


def file_cost(scope: str) -> tuple[int, bool]:
    name = scope.rsplit("/", 1)[-1]
    seconds, kind = E2E_FILES.get(name, (UNLISTED_E2E_S if scope.startswith("tests/e2e/") else 1, ""))
    return seconds, kind == "timed"


class LongestFileFirst(LoadFileScheduling or object):
    """`--dist loadfile` (a file's tests in one worker, so a module's shared sweep runs once), but the next file
    a worker gets is the longest one left (the run does not end waiting on a long file started last), and at
    most two timed files run at once (four would starve each other's Locust on two cores); a worker then takes
    the longest other file."""

    def _timed_files_running(self) -> int:
        return sum(1 for work in self.assigned_work.values() for scope, tests in work.items()
                   if file_cost(scope)[1] and not all(tests.values()))

    def _assign_work_unit(self, node) -> None:
        crowded = self._timed_files_running() >= MAX_TIMED_FILES_AT_ONCE
        ranked = sorted(self.workqueue, key=lambda scope: (crowded and file_cost(scope)[1], -file_cost(scope)[0]))
        self.workqueue.move_to_end(ranked[0], last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: unknown where xdist is absent or -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    if LoadFileScheduling and config.getvalue("dist") == "loadfile":
        return LongestFileFirst(config, log)
    return None


def niceness(scope: str) -> int:
    if not scope.startswith("tests/e2e/"):
        return 10
    return 0 if file_cost(scope)[1] else 5


def pytest_runtest_setup(item):
    # Under pytest-xdist the tests share two cores, by priority: a timed end-to-end test at nice 0, any other at 5,
    # a unit test (pure CPU) at 10 (at one priority the unit tests starved a sweep's Locust: a window voided at
    # lag p99 356 ms; the timed sweeps also accept 250 ms, as moments of 55-61 ms remained). This thread runs the
    # tests and starts their processes, which inherit it. Only as root: lowering the niceness needs CAP_SYS_NICE.
    if os.environ.get("PYTEST_XDIST_WORKER") and os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, niceness(item.nodeid.split("::", 1)[0]))
