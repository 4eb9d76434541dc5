"""Tests of lookahead_runner/sim/."""
