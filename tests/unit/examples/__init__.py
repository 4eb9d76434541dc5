"""Tests of lookahead_runner/examples/."""
