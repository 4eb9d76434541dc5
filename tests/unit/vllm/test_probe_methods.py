"""What the probe learns beside the flags: the speculative methods the help lists, the probe's line in words, and
why a command failed its probe (issue 48)."""
import pytest

from lookahead_runner.vllm.knob import KnobError, check_method
from lookahead_runner.vllm.probe import (Capabilities, ProbeError, capabilities_from, parse_method_choices,
                                         version_from_run)

# what `vllm --version` printed for a wheel whose own script cannot find its package (issue 48's report)
FAILED_VERSION = """Traceback (most recent call last):
  File "/venv/bin/vllm", line 5, in <module>
    from vllm.entrypoints.cli.main import main
  File "/venv/lib/python3.11/site-packages/importlib/metadata/__init__.py", line 565, in from_name
    raise PackageNotFoundError(name)
importlib.metadata.PackageNotFoundError: No package metadata was found for vllm

"""


def caps_032(fixtures_dir) -> Capabilities:
    return capabilities_from("0.32.0\n", (fixtures_dir / "serve-help-all.txt").read_text(), None, ("vllm",))


def test_the_help_lists_the_speculative_methods(fixtures_dir):
    caps = caps_032(fixtures_dir)
    assert {"eagle", "eagle3", "draft_model", "ngram", "mtp", "suffix"} <= caps.spec_methods
    assert "None" not in caps.spec_methods and "eagle-3" not in caps.spec_methods
    assert Capabilities.from_dict(caps.to_dict()).spec_methods == caps.spec_methods   # plan.json keeps them


def test_a_help_without_the_method_flag_leaves_the_methods_unknown():
    assert parse_method_choices("  --speculative-config SPECULATIVE_CONFIG\n") == frozenset()
    # argparse may wrap a long choice list onto the next lines
    assert parse_method_choices("  --spec-method {eagle,eagle3,\n     ngram,None}\n") == {"eagle", "eagle3", "ngram"}


def test_a_method_the_help_does_not_list_is_refused_with_the_nearest(fixtures_dir):
    with pytest.raises(KnobError) as err:
        check_method(caps_032(fixtures_dir), "eagle-3")
    message = str(err.value)
    assert message.startswith('speculation.method = "eagle-3": vLLM 0.32.0 has no such speculative method')
    assert 'did you mean "eagle3"?' in message


def test_a_method_far_from_every_choice_lists_them(fixtures_dir):
    with pytest.raises(KnobError, match="its methods: bailing_hybrid_mtp, .*eagle3, .*suffix$"):
        check_method(caps_032(fixtures_dir), "lookahead")


def test_a_listed_method_or_unknown_choices_pass(fixtures_dir):
    check_method(caps_032(fixtures_dir), "eagle3")
    check_method(Capabilities("0.10.2"), "eagle-3")  # this vLLM's help lists no methods: vLLM answers


def test_the_probe_line_names_the_engine_in_words(fixtures_dir):
    line = caps_032(fixtures_dir).summary("shorthand")
    assert line == ("vLLM 0.32.0 (V1 engine): flags read from `serve --help=all`; K written as "
                    "--spec-method/--spec-model/--spec-tokens; no --num-lookahead-slots")
    assert Capabilities("0.6.6").summary("legacy-flags") == (
        "vLLM 0.6.6 (V0 engine): flags read from `serve --help=all`; K written as "
        "--speculative-model/--num-speculative-tokens; --num-lookahead-slots in effect")
    assert "flags unknown" in Capabilities("0.10.2", help_source="none").summary("config-json")


def test_a_failed_version_names_the_command_its_exit_code_and_its_last_line():
    with pytest.raises(ProbeError) as err:
        version_from_run(["/venv/bin/vllm", "--version"], 1, FAILED_VERSION)
    assert str(err.value) == (
        "server.command: `/venv/bin/vllm --version` exited with code 1 and printed no version: "
        "importlib.metadata.PackageNotFoundError: No package metadata was found for vllm; "
        "check that vLLM runs in the environment server.command gives it")
    assert version_from_run(["vllm", "--version"], 0, "INFO warming up\n0.32.0\n") == "0.32.0"


def test_a_version_command_that_exits_0_without_a_version_says_so():
    with pytest.raises(ProbeError, match=r"^server.command: `vllm --version` exited with code 0 and printed no "
                                         r"version: usage: vllm \[-h\]; check"):
        version_from_run(["vllm", "--version"], 0, "usage: vllm [-h]\n\n")
