"""Bad input, fuzzed (hypothesis): whatever a config file, a `--set` or an argv holds, the CLI answers
with a result or with one line on stderr that names the field, exit code 2, no traceback, and
nothing written anywhere. Valid configs stop at the probe (patched), so no process starts here.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from lookahead_runner import cli
from lookahead_runner.run import runner
from lookahead_runner.config import ConfigError, SweepConfig, config_from_dict, load_config

SECTIONS = {name: list(field.annotation.model_fields) for name, field in SweepConfig.model_fields.items()
            if hasattr(field.annotation, "model_fields")}
TOP_KEYS = set(SweepConfig.model_fields)
FIELD_RE = re.compile(r"\b(" + "|".join(SECTIONS) + r")\.\w+")
FUZZ = settings(max_examples=150, deadline=None, database=None,  # no .hypothesis/ folder in the checkout
                suppress_health_check=[HealthCheck.too_slow])


class ProbeReached(Exception):
    """A valid config got as far as the vLLM probe: where this test stops it."""


@pytest.fixture(autouse=True)
def no_probe(monkeypatch):
    def refuse(*args, **kwargs):
        raise ProbeReached

    monkeypatch.setattr(runner, "probe_and_check", refuse)


# --- generating configs ------------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
scalars = st.one_of(st.booleans(), st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1),
                    st.sampled_from([0, -1, 1, 10 ** 9, 2 ** 63 - 1]),
                    st.floats(allow_nan=True, allow_infinity=True), text,
                    st.sampled_from(["", "--speculative-config", "{not json", "$(touch x)"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=2),
                      max_leaves=6)


@st.composite
def sections(draw, name):
    keys = st.sampled_from(SECTIONS[name]) | st.sampled_from(["bogus", "K", "stage"]) | text
    return draw(st.dictionaries(keys, values, max_size=4))


configs = st.dictionaries(
    st.sampled_from(sorted(TOP_KEYS | {"extra", "Server"})),
    st.one_of(*[sections(name) for name in SECTIONS], values),
    max_size=4,
).map(lambda data: {key: value for key, value in data.items()})


def toml_string(text_: str) -> str:
    escaped = "".join("\\u%04x" % ord(c) if ord(c) < 0x20 or ord(c) == 0x7F else "\\" + c if c in '"\\' else c
                      for c in text_)
    return f'"{escaped}"'


def toml(value, top: bool = True) -> str:
    """Write a dict as TOML (inline tables; nan/inf as TOML spells them)."""
    if isinstance(value, dict):
        items = [f"{toml_string(k)} = {toml(v, False)}" for k, v in value.items()]
        return "\n".join(items) + "\n" if top else "{" + ", ".join(items) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml(v, False) for v in value) + "]"
    if isinstance(value, str):
        return toml_string(value)
    return json.dumps(value)


# --- what every answer must look like ----------------------------------------------------------


def check_one_line(message: str, source: str) -> None:
    assert "\n" not in message.strip() and "Traceback" not in message, message
    assert message.startswith(f"{source}: "), message
    if message.startswith(f"{source}: not valid TOML ("):  # names the line and column instead
        return
    field, _, why = message[len(source) + 2:].partition(": ")
    assert why, message
    if field == "config":  # a rule across fields: the message names them
        assert FIELD_RE.search(why), message
    else:
        assert field.split(".")[0] in TOP_KEYS | {"extra", "Server"} or field.startswith("--set"), message


def run_main(argv: list[str], workdir: Path) -> tuple[int | str, str, str]:
    """cli.main in `workdir`, as the user's shell would run it: (exit code or 'probe', stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    before = sorted(p.name for p in workdir.iterdir())
    previous = os.getcwd()
    os.chdir(workdir)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code: int | str = cli.main(argv)
            except ProbeReached:
                code = "probe"
            except SystemExit as exit_:  # argparse
                code = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        os.chdir(previous)
    assert sorted(p.name for p in workdir.iterdir()) == before, "bad input wrote files"
    return code, out.getvalue(), err.getvalue()


# --- config files ------------------------------------------------------------------------------


@FUZZ
@given(data=configs)
@example(data={"speculation": {"k": []}})
@example(data={"speculation": {"k": [2 ** 63 - 1, -3]}})
@example(data={"load": {"stages": [{"users": 0, "duration_s": float("nan")}]}})
@example(data={"load": {"stages": [{"users": 8, "duration_s": float("inf")}]}})
@example(data={"server": {"extra_args": ["--speculative-config", "{not json"]}})
@example(data={"server": {"port": 70000, "ready_timeout_s": -1}})
@example(data={"load": {"prompt_file": "/nonexistent/prompts.jsonl"}})
def test_any_config_file_is_valid_or_one_line_naming_the_field(tmp_path_factory, data):
    workdir = tmp_path_factory.mktemp("cwd")
    path = workdir / "sweep.toml"
    path.write_text(toml(data), encoding="utf-8")
    code, stdout, stderr = run_main(["sweep", "--config", "sweep.toml", "--out", "runs"], workdir)
    event(f"exit {code}")
    if code == "probe":
        config = load_config(path, {"out": "runs"})  # accepted: the values are sane
        assert all(math.isfinite(s.duration_s) and s.duration_s > 0 for s in config.load.stages)
        return
    assert code == 2, (code, stderr)
    assert stdout == ""
    assert stderr.startswith("lookahead-runner: ")
    check_one_line(stderr.strip()[len("lookahead-runner: "):], "sweep.toml")


@FUZZ
@given(raw=st.binary(max_size=200) | text.map(str.encode))
@example(raw=b"[server\ncommand = ['vllm']")
@example(raw=b"\xff\xfe[server]")
def test_any_bytes_as_a_config_file_are_one_line(tmp_path_factory, raw):
    workdir = tmp_path_factory.mktemp("cwd")
    (workdir / "sweep.toml").write_bytes(raw)
    code, _, stderr = run_main(["sweep", "--config", "sweep.toml", "--out", "runs"], workdir)
    event(f"exit {code}")
    assert code in (2, "probe"), (code, stderr)
    if code == 2:
        assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr, stderr


# --- --set overrides and argv ------------------------------------------------------------------

dotted = st.one_of(
    st.sampled_from([f"{section}.{key}" for section, keys in SECTIONS.items() for key in keys]),
    st.sampled_from(["name", "out", "load.stages.users", "name.x", "server.env.X", ".", "a..b", "load.", "server"]),
    text,
)
raw_values = st.one_of(st.sampled_from(["1", "-1", "0", "1e999", "NaN", "null", "[]", "{}", '"x"', "true",
                                        '["--port", "1"]', '[{"users": 0, "duration_s": 1}]', "abc", ""]), text)


@FUZZ
@given(overrides=st.lists(st.tuples(dotted, raw_values), max_size=3))
@example(overrides=[("name.x", "1")])
@example(overrides=[("load.stages.users", "3")])
@example(overrides=[("server.extra_args", '["--port", "9000"]')])
def test_any_set_override_is_valid_or_one_line(tmp_path_factory, overrides):
    workdir = tmp_path_factory.mktemp("cwd")
    (workdir / "sweep.toml").write_text('[load]\nstages = [{users = 2, duration_s = 2}]\n')
    argv = ["sweep", "--config", "sweep.toml", "--out", "runs"]
    for key, value in overrides:
        argv += ["--set", f"{key}={value}"]
    code, _, stderr = run_main(argv, workdir)
    event(f"exit {code}")
    assert code in (2, "probe"), (code, stderr)
    if code == 2:
        (line,) = stderr.strip().splitlines()
        assert line.startswith("lookahead-runner") and "Traceback" not in line  # argparse: "lookahead-runner sweep: "


FLAGS = ["sweep", "demo", "ramp", "report", "--config", "--out", "--set", "--dry-run", "--resume", "--no-early-stop",
         "--k", "--users", "--rates", "--stage-s", "--url", "--web", "--confirm", "--no-confirm", "-x", "--bogus"]
argv_items = st.one_of(st.sampled_from(FLAGS), st.sampled_from(["-1", "0", "1,2", "0,1", "x", "nan", "inf", "1e9",
                                                                  "sweep.toml", "missing.toml", "k=1", "."]), text)


@FUZZ
@given(argv=st.lists(argv_items, max_size=6))
@example(argv=["ramp", "--users", "0,2"])
@example(argv=["ramp", "--rates", "0,2"])
@example(argv=["ramp", "--rates", "1,nan"])
@example(argv=["ramp", "--rates", "1,2", "--users", "1,2"])
@example(argv=["ramp", "--stage-s", "-1"])
@example(argv=["ramp", "--stage-s", "nan"])
@example(argv=["ramp", "--k", "-2"])
@example(argv=["report", "."])
@example(argv=["sweep", "--resume", "."])
@example(argv=["sweep", "--k", "2"])
def test_any_argv_is_handled_in_one_line(tmp_path_factory, argv):
    workdir = tmp_path_factory.mktemp("cwd")
    (workdir / "sweep.toml").write_text('[load]\nstages = [{users = 2, duration_s = 2}]\n')
    if any(a in ("--help", "-h") for a in argv):
        return
    code, _, stderr = run_main(argv, workdir)
    event(f"exit {code}")
    assert code in (0, 2, "probe"), (code, stderr)
    if code == 2:
        assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr, stderr


# --- the named cases of the issue, one by one --------------------------------------------------

NAMED = [
    ("wrong type", "[load]\nrepeats = \"three\"\n", "load.repeats: give a whole number of repeats (1 to 100) or \"auto\""),
    ("wrong type in a list", "[speculation]\nk = [0, \"two\"]\n", "speculation.k.1: Input should be a valid integer"),
    ("negative", "[speculation]\nk = [-1]\n", "speculation.k: values must be >= 0"),
    ("negative port", "[server]\nport = -5\n", "server.port: Input should be greater than or equal to 0"),
    ("huge", "[load]\nrepeats = 9223372036854775807\n", "load.repeats: give 1 to 100 repeats, or \"auto\""),
    ("infinite", "[load]\nstages = [{users = 2, duration_s = inf}]\n", "load.stages.0.duration_s: Input should be a finite number"),
    ("not a number", "[load]\nwarmup_s = nan\n", "load.warmup_s: Input should be a finite number"),
    ("unknown key", "[load]\nrepeat = 3\n", "load.repeat: unknown key; did you mean repeats?"),
    ("unknown section", "[lod]\nrepeats = 3\n", "lod: unknown key; did you mean load?"),
    ("empty K list", "[speculation]\nk = []\n", "speculation.k: list at least one value"),
    ("empty stage list", "[load]\nstages = []\n", "load.stages: list at least one stage"),
    ("missing prompt file", "[load]\nprompt_file = \"/nonexistent/p.jsonl\"\n",
     "load.prompt_file: '/nonexistent/p.jsonl' does not exist"),
    ("prompt file is a folder", "[load]\nprompt_file = \"/\"\n", "load.prompt_file: '/' is not a file"),
    ("speculative config in extra_args (invalid JSON)", "[server]\nextra_args = [\"--speculative-config\", \"{oops\"]\n",
     "server.extra_args: --speculative-config is written by the runner for every server life"),
    ("speculative config, = form", "[server]\nextra_args = [\"--speculative_config={}\"]\n",
     "server.extra_args: --speculative_config is written by the runner"),
    ("port in extra_args", "[server]\nextra_args = [\"--port\", \"9000\"]\n",
     "server.extra_args: --port is written by the runner for every server life; remove it and set server.port"),
    ("grid over the runner's flag", "[grid]\nflag = \"--speculative-config\"\nvalues = [\"{}\"]\n",
     "grid: grid.flag = '--speculative-config' is written by the runner"),
    ("not TOML", "[server\n", "not valid TOML"),
    # rate stages (issue 37)
    ("a stage with users and rate", "[load]\nstages = [{ users = 4, rate = 2.0, duration_s = 10 }]\n",
     "load.stages.0: a stage has users (closed loop) or rate (requests per second, open loop), not both"),
    ("a negative rate", "[load]\nstages = [{ rate = -2.0, duration_s = 10 }]\n",
     "load.stages.0.rate: rate = -2: give requests per second above 0"),
    ("a stage with neither", "[load]\nstages = [{ duration_s = 10 }]\n",
     "load.stages.0: give the stage users (closed loop)"),
    ("burstiness 0", "[load]\nburstiness = 0.0\n", "load.burstiness: burstiness = 0: give the gamma shape"),
    ("a negative burstiness", "[load]\nburstiness = -1\n", "load.burstiness: burstiness = -1: give the gamma shape"),
    ("a burstiness below its floor", "[load]\nburstiness = 1e-7\n",
     "load.burstiness: burstiness = 1e-07: give the gamma shape of the gaps between arrivals, 5.4e-06 or more"),
    ("burstiness with constant arrivals", "[load]\narrival = \"constant\"\nburstiness = 2.0\n",
     "load: burstiness shapes poisson arrivals' gaps"),
    ("a negative max_in_flight", "[load]\nmax_in_flight = -1\n",
     "load.max_in_flight: Input should be greater than or equal to 0"),
    ("a negative arrival_seed", "[load]\narrival_seed = -1\n",
     "load.arrival_seed: Input should be greater than or equal to 0"),
    ("a stage of more arrivals than a schedule holds", "[load]\nstages = [{ rate = 1e6, duration_s = 1000 }]\n",
     "load.stages.0: rate x duration_s = 1e+09 arrivals in one stage; at most 10000000"),
    ("target_rate with no rate stage", "[decision]\ntarget_rate = 20\n",
     "decision.target_rate = 20 needs a rate stage at that rate: add { rate = 20, duration_s = 60 } to load.stages"),
    ("target_rate at no stage's rate", "[load]\nstages = [{ rate = 4.0, duration_s = 10 }]\n[decision]\ntarget_rate = 5\n",
     "decision.target_rate = 5 is not a rate stage's rate [4]"),
    ("a capacity search without rate stages", "[sweep]\nstrategy = \"capacity\"\n[decision]\nslo = { e2e_p99_ms = 9 }\n",
     "sweep.strategy = \"capacity\" probes rate stages"),
]


@pytest.mark.parametrize("case, text_, expected", NAMED, ids=[case for case, _, _ in NAMED])
def test_named_bad_input(tmp_path, case, text_, expected):
    (tmp_path / "sweep.toml").write_text(text_)
    code, stdout, stderr = run_main(["sweep", "--config", "sweep.toml", "--out", "runs"], tmp_path)
    assert code == 2, (code, stderr)
    (line,) = stderr.strip().splitlines()
    assert line.startswith("lookahead-runner: sweep.toml: ") and expected in line, line
    assert not (tmp_path / "runs").exists()  # nothing started


@pytest.mark.parametrize("argv, expected", [
    (["--rates", "1,x"], "--rates '1,x': write rising rates in requests per second, e.g. --rates 1,2,4,8"),
    (["--rates", "2,-1"], "--rates '2,-1': rates are requests per second above 0, e.g. --rates 1,2,4,8"),
    (["--rates", "inf"], "--rates 'inf': rates are requests per second above 0, e.g. --rates 1,2,4,8"),
    # an empty value (--rates=$RATES unset) is not a users ramp of 8 stages; a falling or repeated rate would start
    # its stage from a higher rate's backlog, and the knee reads each rate from the lower one's steady state
    (["--rates", ""], "--rates '': write rising rates in requests per second, e.g. --rates 1,2,4,8"),
    (["--rates", "8,4,2"], "--rates '8,4,2': give each rate once, rising, e.g. --rates 1,2,4,8"),
    (["--rates", "1,2,2"], "--rates '1,2,2': give each rate once, rising, e.g. --rates 1,2,4,8"),
    (["--rates", "1,2", "--users", "1,2"], "ramp: give --users (closed loop: concurrent users) or --rates (open "
                                           "loop: requests per second), not both"),
])
def test_ramp_rates_bad_input_is_one_line(tmp_path, argv, expected):
    code, stdout, stderr = run_main(["ramp", *argv, "--out", "runs"], tmp_path)
    assert (code, stdout, stderr) == (2, "", f"lookahead-runner: {expected}\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: an unreadable file cannot be made here")
def test_unreadable_prompt_file(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"text": "x"}\n')
    prompts.chmod(0)
    (tmp_path / "sweep.toml").write_text(f'[load]\nprompt_file = "{prompts}"\n')
    code, _, stderr = run_main(["sweep", "--config", "sweep.toml", "--out", "runs"], tmp_path)
    assert code == 2 and "load.prompt_file: cannot read" in stderr


@pytest.mark.parametrize("content, expected", [
    (b'{"text": "ok"}\nnot json\n', "line 2 is not JSON"),
    (b'{"txt": "x"}\n', 'line 1 has no string "text"'),
    (b"\n\n", "no text"),
    (b"\xff\xfe{", "is not UTF-8 text"),
])
def test_prompt_file_that_the_load_could_not_use(tmp_path, content, expected):
    (tmp_path / "p.jsonl").write_bytes(content)
    (tmp_path / "sweep.toml").write_text('[load]\nprompt_file = "p.jsonl"\n')
    code, _, stderr = run_main(["sweep", "--config", "sweep.toml", "--out", "runs"], tmp_path)
    assert code == 2
    (line,) = stderr.strip().splitlines()
    assert line.startswith("lookahead-runner: sweep.toml: load.prompt_file: ") and expected in line, line


def test_readable_prompt_file_is_accepted(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"text": "hello"}\n')
    config = config_from_dict({"load": {"prompt_file": str(prompts)}})
    assert config.load.prompt_file == str(prompts)


def test_config_error_is_always_one_line():
    with pytest.raises(ConfigError) as err:
        config_from_dict({"load": {"stages": [{"users": "x"}]}}, "f.toml")
    assert "\n" not in str(err.value) and str(err.value).startswith("f.toml: load.stages.0.users: ")


@pytest.mark.parametrize("plan", ["{}", "[]", "not json", '{"config": {"load": {"repeats": -1}}, "lives": []}'])
@pytest.mark.parametrize("command", [["report"], ["sweep", "--resume"]])
def test_corrupt_plan_json_is_one_line(tmp_path, plan, command):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "plan.json").write_text(plan)
    code, _, stderr = run_main([*command, "run"], tmp_path)
    assert code == 2, (code, stderr)
    (line,) = stderr.strip().splitlines()
    assert line.startswith("lookahead-runner: ") and "plan.json" in line and "Traceback" not in line, line
