"""Tests of lookahead_runner/live/."""
