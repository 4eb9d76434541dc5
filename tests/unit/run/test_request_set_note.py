"""The one line a run says about how its request set was read (issue 37): printed at the start, kept in
decision.json's diagnoses (the report's), never a key dropped without a word."""
import json

from lookahead_runner.config import config_from_dict
from lookahead_runner.run.verdict.request_set_run import request_set_note


def test_the_note_names_the_format_the_ignored_keys_and_a_fixed_length_that_overrides_the_sets(tmp_path):
    path = tmp_path / "question.jsonl"
    path.write_text("".join(json.dumps({"question_id": i, "category": "qa", "turns": [f"q {i}"],
                                        **({"reference": ["a"]} if i < 5 else {}), "output_tokens": 30}) + "\n"
                            for i in range(20)))
    natural = config_from_dict({"load": {"requests": str(path), "endpoint": "chat", "output_tokens": "natural"}})
    assert request_set_note(natural) == (f"Request set {path}: 20 requests, read as SpecBench question.jsonl; "
                                         "ignored keys: question_id (20 requests), reference (5 requests).")
    fixed = config_from_dict({"load": {"requests": str(path), "endpoint": "chat", "output_tokens": 16}})
    assert request_set_note(fixed).endswith("; load.output_tokens = 16 sends every request exactly that long: the "
                                            "set's own output lengths (20 requests) are not used; set "
                                            "load.output_tokens = \"natural\" to use them.")
    assert request_set_note(config_from_dict({})) == ""
