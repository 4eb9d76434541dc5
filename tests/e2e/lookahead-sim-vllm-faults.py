"""The simulated vLLM with per-setting faults, for the reliability matrix (tests/e2e/test_fault_*.py).

Used as a sweep's `server.command` = [python, this file]. It runs the simulator in this same
process (so the runner's process group, pid and signals are exactly the simulator's) with extra
arguments from SIM_FAULTS_AT_K (JSON {"K": [arg, ...]}): extra `serve` arguments for the life whose
num_speculative_tokens is K (0 when speculation is off), e.g. {"2": ["--sim-fault", "die-after=3"]}.
The simulator's own fault modes are global; this makes them per setting, so one sweep shows a
faulty setting between good ones. (VLLM_API_KEY is read by the simulator itself, as by vLLM.)

The file name contains "lookahead-sim-vllm" so the runner recognises the simulator (memory file).
"""
import json
import os
import sys

from lookahead_runner.sim import __main__ as sim_main


def k_of(argv: list[str]) -> int:
    for flag in ("--speculative-config", "--spec-tokens", "--num-speculative-tokens"):
        if flag in argv:
            value = argv[argv.index(flag) + 1]
            return int(json.loads(value)["num_speculative_tokens"]) if value.startswith("{") else int(value)
    return 0


def main() -> int:
    argv = sys.argv[1:]
    if argv and argv[0] == "serve" and "--help" not in " ".join(argv):
        faults = json.loads(os.environ.get("SIM_FAULTS_AT_K", "{}"))
        argv = argv + list(faults.get(str(k_of(argv)), []))
    return sim_main.main(argv)


if __name__ == "__main__":
    sys.exit(main())
