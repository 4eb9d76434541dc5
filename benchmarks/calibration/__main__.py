"""`python -m benchmarks.calibration`: the suite's entry point (run.py)."""
import sys

from .run import main

sys.exit(main())
