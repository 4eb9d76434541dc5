"""`python -m lookahead_runner.sim serve MODEL ...` (`lookahead-sim-vllm`): the simulated vLLM's entry point.

It answers as vLLM's command line does (`--version`, `serve --help`, the usage) and starts one `serve`
process (serve.py: the startup phase of startup.py, then HTTP). The emulated vLLM version (profiles.py) comes
from `--sim-version V` placed before the subcommand (`python -m lookahead_runner.sim --sim-version 0.6.6 serve
...`, so a runner's command prefix selects it for `--version`, `serve --help` and `serve` alike), else from the
environment variable LOOKAHEAD_SIM_VLLM_VERSION, else 0.32.0. `python -c CODE` runs CODE against a stand-in
`vllm` package of that version (sim/introspect.py), as a launcher's interpreter would.
"""
from __future__ import annotations

import asyncio
import os
import sys

from lookahead_runner.sim import logs
from lookahead_runner.sim.cli import ConfigError, help_text, parse_serve
from lookahead_runner.sim.profiles import DEFAULT_PROFILE, get_profile
from lookahead_runner.sim.serve import serve

PROFILE_ENV = "LOOKAHEAD_SIM_VLLM_VERSION"
_TOP_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."


def _pop_sim_version(argv: list[str]) -> tuple[list[str], str | None]:
    """`--sim-version V` / `--sim-version=V` before the subcommand."""
    if argv and argv[0].startswith("--sim-version="):
        return argv[1:], argv[0].split("=", 1)[1]
    if argv and argv[0] == "--sim-version":
        return argv[2:], argv[1] if len(argv) > 1 else ""
    return argv, None


def main(argv: list[str] | None = None) -> int:
    argv, version = _pop_sim_version(list(sys.argv[1:] if argv is None else argv))
    try:
        profile = get_profile(version if version is not None else os.environ.get(PROFILE_ENV, DEFAULT_PROFILE))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    log = logs.Logger(profile)
    if not argv or argv[0] in ("-h", "--help"):
        print(_TOP_USAGE)
        return 0
    if argv[0] in ("-v", "--version"):
        print(profile.version)
        return 0
    if argv[0] == "python":  # the emulated vLLM's interpreter, for the probe (introspect.py)
        from lookahead_runner.sim.introspect import run_python

        return run_python(argv[1:], profile)
    if argv[0] != "serve":
        print(_TOP_USAGE, file=sys.stderr)
        print(f"vllm: error: argument subparser: invalid choice: {argv[0]!r} (choose from 'chat', 'complete', "
              "'serve', 'bench', 'collect-env', 'run-batch')", file=sys.stderr)
        return 2
    text = help_text(argv[1:], profile)
    if text is not None:
        sys.stdout.write(text)
        return 0
    try:
        args = parse_serve(argv[1:], profile)
    except ConfigError as e:
        log("ERROR", "api_server.py:1977", str(e))
        return 1
    return asyncio.run(serve(args, profile))


if __name__ == "__main__":
    sys.exit(main())
