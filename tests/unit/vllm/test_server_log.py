"""Why a vLLM server stopped, from its log (vllm/server_log.py): two real vLLM 0.32 start failures, whose last
lines are not the cause, and the shapes around them."""
from __future__ import annotations

import re

import pytest

from lookahead_runner.vllm.server_log import cause, last_error_line, raised

MEMORY_CAUSE = ("ValueError: Available memory on node 0 (8.78/10.21 GiB) on startup is less than desired CPU memory "
                "utilization (0.92, 9.4 GiB). On the CPU backend, the `--gpu-memory-utilization` flag controls the "
                "fraction of CPU memory reserved (despite its name). To resolve: decrease `--gpu-memory-utilization` "
                "(e.g. `--gpu-memory-utilization 0.5`) or reduce CPU memory used by other processes.")


def _log(fixtures_dir, name: str) -> str:
    return (fixtures_dir / f"server-log-startfail-{name}.txt").read_text(encoding="utf-8")


def test_the_root_cause_120_lines_above_the_wrapper_that_ends_the_log(fixtures_dir):
    log = _log(fixtures_dir, "cpu-memory")
    assert log.rstrip().splitlines()[-1].startswith("RuntimeError: Engine core initialization failed. See root cause")
    assert [r.type for r in raised(log)] == ["ValueError", "Exception", "Exception", "RuntimeError"]
    assert cause(log) == f"{MEMORY_CAUSE} (the root cause of RuntimeError: Engine core initialization failed)"


def test_a_message_over_several_lines_under_a_pydantic_help_url(fixtures_dir):
    log = _log(fixtures_dir, "draft-name")
    assert log.rstrip().splitlines()[-1].strip().startswith("For further information visit https://errors.pydantic")
    assert cause(log) == ("ValidationError: 1 validation error for SpeculativeConfig: Value error, Invalid "
                          "repository ID or local directory specified: 'sim/llama-68m'.")


def test_the_exception_raised_last_when_it_points_nowhere_else():
    log = "\n".join(["INFO 12-03 17:05:54 [api.py:1] starting", "Traceback (most recent call last):",
                     '  File "x.py", line 1, in <module>', "    main()", "OSError: [Errno 98] Address already in use"])
    assert cause(log) == "OSError: [Errno 98] Address already in use"


def test_lines_of_other_processes_inside_a_traceback_are_read_past():
    worker = "(VllmWorker-0 pid=7) ERROR 12-03 17:06:06 [multiproc_executor.py:953] "
    other = "(APIServer pid=6) INFO 12-03 17:06:06 [api_server.py:1] "
    log = "\n".join([worker + "Traceback (most recent call last):", worker + '  File "w.py", line 3, in init',
                     other + "waiting for the engine", worker + "    raise ValueError(",
                     worker + "ValueError: not enough KV cache", other + "shutting down",
                     "RuntimeError: Engine core initialization failed. See root cause above."])
    assert cause(log) == "ValueError: not enough KV cache"  # the bare last line is no traceback's end


@pytest.mark.parametrize("log, line", [
    ("usage: vllm serve ...\nvllm serve: error: argument --max-num-seqs: invalid int value: 'abc'\n",
     "vllm serve: error: argument --max-num-seqs: invalid int value: 'abc'"),
    ("(EngineCore pid=3) ERROR 11-29 23:16:55 [core.py:1088] EngineCore encountered a fatal error\n"
     "(APIServer pid=2) ERROR 11-29 23:16:55 [async_llm.py:906] EngineDeadError: EngineCore encountered an issue. "
     "See stack trace (above) for the root cause.\n", "EngineCore encountered a fatal error"),
    ("", "no output"),
])
def test_a_log_without_a_traceback_gives_its_last_error_line(log, line):
    assert cause(log) == last_error_line(log) == line


def test_a_wrapper_with_nothing_before_it_is_said_as_it_is():
    log = "Traceback (most recent call last):\n  File \"a.py\", line 1\nRuntimeError: Engine core initialization " \
          "failed. See root cause above. Failed core proc(s): {}"
    assert cause(log) == "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"


def test_a_traceback_cut_short_does_not_hide_the_ones_after_it():
    """A worker killed while it printed its traceback (its writer never goes on): the scan resumes after it."""
    tp0 = "(Worker_TP0 pid=7) ERROR 12-03 17:06:06 [multiproc_executor.py:953] "
    tp1 = "(Worker_TP1 pid=8) ERROR 12-03 17:06:06 [multiproc_executor.py:953] "
    api = "(APIServer pid=6) INFO 12-03 17:06:06 [api_server.py:1] "
    log = "\n".join([tp0 + "Traceback (most recent call last):", tp0 + '  File "w.py", line 3, in init',
                     *(api + f"waiting for the engine ({i})" for i in range(450)),
                     tp1 + "Traceback (most recent call last):", tp1 + '  File "w.py", line 3, in init',
                     tp1 + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                     "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
                     "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"])
    assert [r.type for r in raised(log)] == ["OutOfMemoryError", "RuntimeError"]
    assert cause(log) == ("OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (the root cause of "
                          "RuntimeError: Engine core initialization failed)")


def _colored(line: str) -> str:
    """A log line as vLLM 0.32's ColoredFormatter writes it (vllm/logging_utils/formatter.py): with
    VLLM_LOGGING_COLOR=1 or FORCE_COLOR set, even into a file."""
    match = re.match(r"^(\(\w[\w-]* pid=\d+\)) (ERROR|INFO|WARNING|DEBUG) ([\d-]+ [\d:]+) (\[[^\]]*\]) ", line)
    if not match:
        return line
    level = {"ERROR": "\x1b[31m", "INFO": "\x1b[32m", "WARNING": "\x1b[33m", "DEBUG": "\x1b[37m"}[match.group(2)]
    return (f"\x1b[0;36m{match.group(1)}\x1b[0;0m {level}{match.group(2)}\x1b[0m \x1b[90m{match.group(3)}\x1b[0m "
            f"\x1b[90m{match.group(4)}\x1b[0m {line[match.end():]}")


def test_a_log_in_color_gives_the_same_cause(fixtures_dir):
    log = "\n".join(_colored(line) for line in _log(fixtures_dir, "cpu-memory").splitlines())
    assert "\x1b[0;36m(VllmWorker-0 pid=19641)\x1b[0;0m \x1b[31mERROR\x1b[0m" in log
    assert cause(log) == f"{MEMORY_CAUSE} (the root cause of RuntimeError: Engine core initialization failed)"
    assert last_error_line("\x1b[0;36m(APIServer pid=2)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m11-29 23:16:55\x1b[0m "
                           "\x1b[90m[core.py:1088]\x1b[0m EngineCore encountered a fatal error") == \
        "EngineCore encountered a fatal error"
