"""benchmarks/vs_vllm_bench.py: bad arguments and a load with no request answered end in one line, no traceback."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from .scripts import load

bench = load("vs_vllm_bench")


@pytest.mark.parametrize("argv, field", [(["--rate", "0"], "--rate"), (["--seconds", "-5"], "--seconds"),
                                         (["--runs", "0"], "--runs"), (["--tokens", "0"], "--tokens"),
                                         (["--rate", "nan"], "--rate")])
def test_a_value_that_cannot_run_is_refused_naming_the_flag(argv, field, capsys):
    """Before: --runs 0 ended in a KeyError from an empty table, --rate 0 sent one request and divided by a zero
    span, --seconds -5 started the server first."""
    with pytest.raises(SystemExit) as stop:
        bench.parse_args(argv)
    assert stop.value.code == 2
    assert f"argument {field}:" in capsys.readouterr().err


def test_the_defaults_parse():
    args = bench.parse_args([])
    assert (args.rate, args.seconds, args.tokens, args.runs, args.arrival) == (2.0, 40.0, 64, 5, "poisson")


def test_a_load_with_no_request_answered_is_one_line_not_a_traceback():
    """Before: numpy's "zero-size array to reduction operation maximum" from figures()."""
    empty = np.array([])
    with pytest.raises(SystemExit) as stop:
        bench.figures(empty, empty, empty, "the runner")
    assert "the runner: no request completed" in str(stop.value.code)
