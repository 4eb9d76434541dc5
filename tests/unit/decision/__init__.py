"""Tests of lookahead_runner/decision/."""
