"""A request set against a real vLLM 0.32 (issue 28): the probe finds --per-request-spec-decode-metrics in the
installed build's help, the runner adds `summary` to the draft-model life only (vLLM refuses it without
speculation), every response's metrics.speculative_decoding lands in requests.csv, and pooled over the life they
agree with the server's Prometheus counters within 5 %. Natural lengths: each request capped by its own max_tokens.

Perturbed draft (acceptance ~0.5), K in {0, 2}, one stage of 2 users. Needs `bash tests/vllm_cpu/setup.sh`; run with
`python -m pytest -n 0 -m vllm_cpu tests/vllm_cpu/test_request_set_vllm.py`.
"""
from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest
from test_real_vllm import MISSING, ProcessWatch, kill_leftovers, run_cli, sweep_toml, vllm_processes

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first"),
]

WORDS = "the quiet harbor light keeps a long watch over the cold grey sea while ships pass far from shore".split()


def request_set(path):
    lines = [{"prompt": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(8 + i % 7)), "max_tokens": 12 + i % 9,
              "category": "short" if i % 2 else "long"} for i in range(40)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def set_run(tmp_path_factory):
    baseline = {p.pid for p in vllm_processes()}
    root = tmp_path_factory.mktemp("request-set")
    toml = sweep_toml("e2e-request-set", "tiny-draft-perturbed", [0, 2], stage_s=8)
    toml = toml.replace("stages = [{ users = 2, duration_s = 8 }, { users = 4, duration_s = 8 }]",
                        "stages = [{ users = 2, duration_s = 8 }]")
    toml = toml.replace("prompt_tokens = 32\noutput_tokens = 32\n",
                        f"requests = {json.dumps(str(request_set(root / 'set.jsonl')))}\noutput_tokens = \"natural\"\n")
    assert "natural" in toml and "duration_s = 8 }]" in toml
    (root / "sweep.toml").write_text(toml)
    with ProcessWatch():
        try:
            done = run_cli("sweep", "--config", str(root / "sweep.toml"), "--out", str(root / "runs"),
                           "--no-early-stop", timeout=600)
        except subprocess.TimeoutExpired as err:
            killed = kill_leftovers(baseline)
            pytest.fail(f"the request-set sweep overran 600 s; killed {killed}\n{(err.stdout or b'')[-2000:]!r}")
    kill_leftovers(baseline)
    (run_dir,) = list((root / "runs").iterdir())
    return done, run_dir


def test_per_request_metrics_from_real_vllm_agree_with_its_counters(set_run):
    done, run_dir = set_run
    assert done.returncode in (0, 3), f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    plan = json.loads((run_dir / "plan.json").read_text())
    argv = {life["k"]: life["argv"] for life in plan["lives"]}
    assert "--per-request-spec-decode-metrics" not in argv[0]
    at = argv[2].index("--per-request-spec-decode-metrics")
    assert argv[2][at + 1] == "summary"
    requests = pd.read_csv(run_dir / "k2" / "r0" / "requests.csv")
    ok = requests[requests["ok"] == 1]
    assert len(ok) >= 10 and ok["spec_steps"].notna().all() and ok["category"].isin(["short", "long"]).all()
    assert (ok["output_tokens"] <= 12 + ok["request_index"] % 9).all()      # each capped by its own max_tokens
    server = pd.read_csv(run_dir / "k2" / "r0" / "server_metrics.csv")
    drafts = server["spec_drafts_total"].dropna()
    accepted = server["spec_accepted_total"].dropna()
    counters = 1 + (accepted.iloc[-1] - accepted.iloc[0]) / (drafts.iloc[-1] - drafts.iloc[0])
    pooled = 1 + ok["spec_accepted_tokens"].sum() / ok["spec_steps"].sum()
    assert pooled == pytest.approx(counters, rel=0.05), (pooled, counters)
    summary = json.loads((run_dir / "decision.json").read_text())["request_set"]
    assert summary["acceptance_source"] == "per-request" and summary["spec_metrics_flag_added"]
    mix = next(a for a in summary["acceptance"] if a["category"] == "the mix" and a["k"] == 2)
    assert mix["acceptance_length"] == pytest.approx(pooled, rel=0.01)
    print(f"real vLLM: per-request pooled acceptance length {pooled:.3f}, counters {counters:.3f}; "
          f"natural outputs the same in every K: {summary['agreement']}")
