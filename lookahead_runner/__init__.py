"""lookahead-runner: decide how far vLLM should speculate under high concurrency."""
__version__ = "0.1.0"
