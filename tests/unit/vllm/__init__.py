"""Tests of lookahead_runner/vllm/."""
