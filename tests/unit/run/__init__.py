"""Tests of lookahead_runner/run/."""
