"""Tests of lookahead_runner/report/."""
