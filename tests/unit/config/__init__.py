"""Tests of lookahead_runner/config/."""
