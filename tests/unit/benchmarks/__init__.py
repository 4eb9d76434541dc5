"""Tests of the helpers of benchmarks/ (the scripts that measure the decision's accuracy)."""
