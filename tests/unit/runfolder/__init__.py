"""Tests of lookahead_runner/runfolder/."""
