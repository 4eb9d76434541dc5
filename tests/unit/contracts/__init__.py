"""Tests of lookahead_runner/contracts/."""
