"""The simulated vLLM with per-setting faults, for the reliability matrix (tests/e2e/test_fault_*.py).

Used as a sweep's `server.command` = [python, this file]. It runs the simulator in this same
process (so the runner's process group, pid and signals are exactly the simulator's) after two
changes to the argv/environment that a real deployment could produce:

* SIM_FAULTS_AT_K (JSON {"K": [arg, ...]}): extra `serve` arguments for the life whose
  num_speculative_tokens is K (0 when speculation is off), e.g. {"2": ["--sim-fault", "die-after=3"]}.
  The simulator's own fault modes are global; this makes them per setting, so one sweep shows a
  faulty setting between good ones.
* VLLM_API_KEY: as real vLLM does (`args.api_key or envs.VLLM_API_KEY`), the key protects /v1/*
  when it is set in the environment, without appearing in the argv or the server's log.

The file name contains "lookahead-sim-vllm" so the runner recognises the simulator (memory file).
"""
import dataclasses
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
        key = os.environ.get("VLLM_API_KEY", "")
        if key:
            parse = sim_main.parse_serve

            def parse_with_env_key(args, profile):
                served = parse(args, profile)
                return served if served.api_keys else dataclasses.replace(served, api_keys=(key,))

            sim_main.parse_serve = parse_with_env_key
    return sim_main.main(argv)


if __name__ == "__main__":
    sys.exit(main())
