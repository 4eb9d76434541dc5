"""Issue 37 item 7: a request set whose every request carries its own output length (vLLM bench's custom JSONL
output_tokens, or max_tokens) is sent with those lengths when load.output_tokens is not given, as `vllm bench serve`
sends them; a given load.output_tokens still wins (and the run says so), and a set with some lengths missing keeps
the fixed default."""
from __future__ import annotations

import json

from lookahead_runner.config import config_from_dict


def _set(tmp_path, lines) -> str:
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_a_set_with_every_length_is_sent_with_its_own_lengths(tmp_path):
    path = _set(tmp_path, [{"prompt": f"p{i}", "output_tokens": 10 + i} for i in range(12)])
    config = config_from_dict({"load": {"requests": path}})
    assert config.load.output_tokens == "natural" and config.load.variants[0].natural_output


def test_a_given_output_length_wins_over_the_sets_own(tmp_path):
    path = _set(tmp_path, [{"prompt": f"p{i}", "output_tokens": 10 + i} for i in range(12)])
    assert config_from_dict({"load": {"requests": path, "output_tokens": 32}}).load.output_tokens == 32


def test_a_set_missing_some_lengths_keeps_the_fixed_default(tmp_path):
    lines = [{"prompt": f"p{i}", "max_tokens": 16} for i in range(11)] + [{"prompt": "no length"}]
    config = config_from_dict({"load": {"requests": _set(tmp_path, lines)}})
    assert config.load.output_tokens == 64 and not config.load.variants[0].natural_output
