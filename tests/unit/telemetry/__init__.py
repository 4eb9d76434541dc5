"""Tests of lookahead_runner/telemetry/."""
