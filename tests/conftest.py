import os
from pathlib import Path

import pytest

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


def pytest_runtest_setup(item):
    # Under pytest-xdist the unit tests (pure CPU) run beside the sweeps; at their normal priority they starved
    # a sweep's Locust (a window voided at lag p99 356 ms). This thread runs the tests (and starts their
    # processes): nice 10 for a unit test, back to 0 for a sweep; only as root, as lowering the niceness again
    # needs CAP_SYS_NICE.
    if os.environ.get("PYTEST_XDIST_WORKER") and os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, 10 if item.nodeid.startswith("tests/unit/") else 0)
