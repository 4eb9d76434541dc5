"""Tests of lookahead_runner/workload/."""
