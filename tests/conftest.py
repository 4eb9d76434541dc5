import os
import signal
import threading
from pathlib import Path

import pytest

try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # a bare host (tests/gpu on a GPU machine): one test at a time, `-o addopts=""`
    LoadFileScheduling = None

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "vllm-0.32.0-cpu"

# The tests that send a runner SIGINT stand for a terminal's Ctrl-C. A shell without job control (a script, a tool
# running commands) starts what it puts in the background (`python -m pytest ... &`) with SIGINT ignored, every
# process started from there inherits that, and a Python that starts with SIGINT ignored keeps ignoring it (it
# installs its Ctrl-C handler only over the default; the runner keeps what a shell or nohup ignored): in such a run
# the Ctrl-C tests' runners ran to their end, exit 3, instead of stopping with 130. Every test process takes Ctrl-C
# back, so what its tests start gets SIGINT at its default (a handler set here is the default in an exec'd child).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The restart spread ledger lives in the user's cache folder (runfolder/spread_ledger.py): no test reads or writes the
# real one. Every test process (and the sweeps it starts) gets a cache folder of its own; a test of the ledger
# points XDG_CACHE_HOME at its tmp_path (`cache_dir`).
if "LOOKAHEAD_TEST_CACHE" not in os.environ:
    import tempfile

    os.environ["LOOKAHEAD_TEST_CACHE"] = os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="lookahead-cache-")


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user cache folder (XDG_CACHE_HOME) for this test and what it starts."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


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
# their kind: "timed" where a test asserts what a measurement says (which K wins, how many lives it took, a window
# valid, a pre-flight's lag): a host crowded by other sweeps can turn those by starving their Locust; "alone" where
# it asserts a pick near a crossover, which a starved simulator moves: test_confirm_sim's K=0 beats K=4 by 35 % at
# 34 users alone, yet a CI run with another timed file beside it measured K=4 ahead there (a stalled step costs
# K=0, one token a step, the most).
E2E_FILES = {
    "test_workload_variants_sim.py": (189, "timed"), "test_repeat_mode.py": (142, "timed"),
    "test_confirm_sim.py": (231, "alone"), "test_runner_lives.py": (107, "timed"),
    "test_fault_settings.py": (104, ""), "test_adaptive_sim.py": (95, "timed"),
    "test_missing_telemetry.py": (90, "timed"), "test_fault_signals.py": (89, ""), "test_fault_env.py": (86, ""),
    "test_secret_args.py": (52, ""), "test_cpu_placement.py": (51, "timed"), "test_sweep_sim.py": (43, "timed"),
    "test_spec_key_grid.py": (36, ""), "test_chat_sim.py": (114, "timed"),
    "test_in_effect_sim.py": (51, "timed"), "test_cluster_ray.py": (260, "timed"),
    "test_request_set_sim.py": (98, "timed"), "test_cluster_adaptive.py": (124, "timed"),
    "test_cluster_faults.py": (222, ""), "test_cluster_nodes.py": (56, ""),
    "test_running_server_sim.py": (70, ""),
    "test_cluster_life_faults.py": (95, ""), "test_cluster_slots.py": (90, ""),
    "test_rate_stages_sim.py": (57, "timed"), "test_rate_locust.py": (31, "timed"),
    "test_ramp_rates_sim.py": (36, "timed"),
    "test_capacity_sim.py": (185, "alone"), "test_spread_ledger_sim.py": (75, "timed"),
    # a unit file, but one long run (the calibration suite's CI slice, 40 s of CPU; 85 s on 2 busy cores)
    "test_calibration_slice.py": (85, ""),
}
UNLISTED_E2E_S = 30
MAX_TIMED_FILES_AT_ONCE = 2
NICENESS = {"alone": -5, "timed": 0, "": 5}  # of an end-to-end file by kind; a unit test runs at 10


def file_cost(scope: str) -> tuple[int, str]:
    name = scope.rsplit("/", 1)[-1]
    return E2E_FILES.get(name, (UNLISTED_E2E_S if scope.startswith("tests/e2e/") else 1, ""))


class LongestFileFirst(LoadFileScheduling or object):
    """`--dist loadfile` (a file's tests in one worker, so a module's shared sweep runs once), but the next file
    a worker gets is the longest one left (the run does not end waiting on a long file started last); at most two
    timed files run at once (four would starve each other's Locust on two cores), and an "alone" file beside no
    other timed one. A worker kept from a timed file takes the longest other file (one left with nothing else
    takes the timed file anyway: a preference, so no worker idles)."""

    def _timed_kinds_running(self) -> list[str]:
        return [file_cost(scope)[1] for work in self.assigned_work.values() for scope, tests in work.items()
                if file_cost(scope)[1] and not all(tests.values())]

    def _assign_work_unit(self, node) -> None:
        running = self._timed_kinds_running()
        ranked = sorted(self.workqueue, key=lambda scope: (_held_back(file_cost(scope)[1], running),
                                                           -file_cost(scope)[0]))
        self.workqueue.move_to_end(ranked[0], last=False)
        super()._assign_work_unit(node)


def _held_back(kind: str, running: list[str]) -> bool:
    """Whether a file of `kind` should wait while timed files of the kinds `running` run."""
    if not kind or not running:
        return False
    return kind == "alone" or "alone" in running or len(running) >= MAX_TIMED_FILES_AT_ONCE


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: unknown where xdist is absent or -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    if LoadFileScheduling and config.getvalue("dist") == "loadfile":
        return LongestFileFirst(config, log)
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """pyproject's `-m 'not vllm_cpu and not slow'` deselects a slow test even in a file named on the command line
    (CI runs them): a run of such a file says why it ran less than the file holds, -q or not."""
    if "not slow" not in (config.getoption("markexpr", "") or ""):
        return
    named = {arg.split("::", 1)[0] for arg in config.args}
    slow = sorted(path for path in named if path.endswith(".py") and Path(path).is_file()
                  and "pytest.mark.slow" in Path(path).read_text())
    if slow:
        terminalreporter.write_line(f"{', '.join(slow)}: its slow tests were deselected by pyproject's "
                                    "-m 'not vllm_cpu and not slow'; add -m slow to run them")


def niceness(scope: str) -> int:
    if not scope.startswith("tests/e2e/"):
        return 10
    return NICENESS[file_cost(scope)[1]]


def pytest_runtest_setup(item):
    # Under pytest-xdist the tests share two cores, by priority (NICENESS): an "alone" end-to-end test at nice -5, a
    # timed one at 0, any other at 5, a unit test (pure CPU) at 10 (at one priority the unit tests starved a sweep's Locust: a window voided at
    # lag p99 356 ms; the timed sweeps also accept 250 ms, as moments of 55-61 ms remained). This thread runs the
    # tests and starts their processes, which inherit it. Only as root: lowering the niceness needs CAP_SYS_NICE.
    if os.environ.get("PYTEST_XDIST_WORKER") and os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, niceness(item.nodeid.split("::", 1)[0]))
