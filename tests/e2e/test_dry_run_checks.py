"""The dry run catches what would cost a server life, and says what it will start in plain words (issue 48).

Through the CLI, against a fake `vllm` that answers the probe as vLLM 0.32 does (its recorded `serve --help=all`)
and writes down every call: a method the help does not offer, a model or draft path that does not exist, a K > 0
with no draft for a method that loads one, and a `--version` that fails are each one line on stderr and exit 2,
with no server started; a Hugging Face name missing from the local cache and rate stages without an SLO are
warnings; the text names the engine, the port each life gets and what Locust's processes are planned for.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

VERSION_OK = 'print("0.32.0")'
TRACEBACK = ["Traceback (most recent call last):", '  File "/venv/bin/vllm", line 5, in <module>',
             "    raise PackageNotFoundError(name)",
             "importlib.metadata.PackageNotFoundError: No package metadata was found for vllm", ""]
VERSION_BROKEN = f"sys.stderr.write({chr(10).join(TRACEBACK)!r})\nsys.exit(1)"

FAKE_VLLM = '''#!{python}
import json, pathlib, sys
with open({calls!r}, "a") as calls:
    calls.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if args == ["--version"]:
{version}
elif args[:2] == ["serve", "--help=all"]:
    sys.stdout.write(pathlib.Path({help!r}).read_text())
else:
    sys.exit(2)  # `serve MODEL` would start a server: the calls file tells the tests it never came
'''

SWEEP = """
[server]
command = [{command!r}]
model = {model!r}
port = {port}
[speculation]
k = [0, 4]
method = {method!r}
draft_model = {draft!r}
[load]
stages = [{stage}]
preflight_s = 0
{extra}
"""


class Fake:
    """The fake vllm of one test: its command and the calls it received."""

    def __init__(self, tmp_path: Path, fixtures_dir: Path, version: str = VERSION_OK) -> None:
        self.calls = tmp_path / "vllm.calls"
        self.command = tmp_path / "bin" / "vllm"
        self.command.parent.mkdir()
        body = "\n".join("    " + line for line in version.splitlines())
        self.command.write_text(FAKE_VLLM.format(python=sys.executable, calls=str(self.calls), version=body,
                                                 help=str(fixtures_dir / "serve-help-all.txt")))
        self.command.chmod(0o755)

    def served(self) -> list[str]:
        """Calls that would have started a server (anything but the probe's)."""
        calls = [json.loads(line) for line in self.calls.read_text().splitlines()] if self.calls.exists() else []
        return [args for args in calls if args[:1] == ["serve"] and not args[1].startswith("--help")]


def dry_run(tmp_path: Path, fake: Fake, *, model: str = "", method: str = "draft_model", draft: str = "",
            port: int = 0, stage: str = "{ users = 2, duration_s = 5 }", extra: str = "",
            env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    models = tmp_path / "models"
    for name in ("target", "draft"):
        (models / name).mkdir(parents=True, exist_ok=True)
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP.format(command=str(fake.command), model=model or str(models / "target"), port=port,
                                   method=method, draft=str(models / "draft") if draft == "" else draft, stage=stage,
                                   extra=extra))
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE", "TRANSFORMERS"))}
    environ["HF_HUB_CACHE"] = str(tmp_path / "hub")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config), "--dry-run",
                           "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=120,
                          env=environ | (env or {}), cwd=tmp_path)
    return done, time.monotonic() - started


def refused(done: subprocess.CompletedProcess, tmp_path: Path, fake: Fake) -> str:
    """The one line of a refusal, after checking exit 2, no traceback, no run folder and no server started."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("lookahead-runner: ") and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() and fake.served() == []
    return line


def test_a_method_the_probed_vllm_lacks_is_one_line_with_the_nearest(tmp_path, fixtures_dir):
    fake = Fake(tmp_path, fixtures_dir)
    done, seconds = dry_run(tmp_path, fake, method="eagle-3")
    line = refused(done, tmp_path, fake)
    assert 'speculation.method = "eagle-3": vLLM 0.32.0 has no such speculative method' in line
    assert line.endswith('did you mean "eagle3"?') and seconds < 60


def test_a_draft_path_that_does_not_exist_is_refused_before_the_probe(tmp_path, fixtures_dir):
    fake = Fake(tmp_path, fixtures_dir)
    done, seconds = dry_run(tmp_path, fake, draft="/path/that/does-not-exist")
    line = refused(done, tmp_path, fake)
    assert line == ("lookahead-runner: speculation.draft_model: '/path/that/does-not-exist' does not exist on this "
                    "host and is no Hugging Face name; give the draft's folder or its Hugging Face name")
    assert not fake.calls.exists() and seconds < 60   # refused before the probe


def test_a_model_path_that_does_not_exist_is_refused(tmp_path, fixtures_dir):
    fake = Fake(tmp_path, fixtures_dir)
    done, _ = dry_run(tmp_path, fake, model="./models/missing/target")
    line = refused(done, tmp_path, fake)
    assert "server.model: './models/missing/target' does not exist on this host" in line


def test_k_above_0_with_no_draft_for_a_method_that_loads_one_is_refused(tmp_path, fixtures_dir):
    fake = Fake(tmp_path, fixtures_dir)
    done, _ = dry_run(tmp_path, fake, method="eagle3", draft=" ")
    line = refused(done, tmp_path, fake)
    assert 'speculation.draft_model: method "eagle3" loads a draft for every K > 0 and none is given' in line


def test_a_hugging_face_name_not_in_the_cache_is_a_warning_with_what_the_cache_holds(tmp_path, fixtures_dir):
    fake = Fake(tmp_path, fixtures_dir)
    partial = tmp_path / "hub" / "models--org--draft" / "blobs"
    partial.mkdir(parents=True)
    (partial / "abc.incomplete").write_bytes(b"\0" * (3 << 20))
    cached = tmp_path / "hub" / "models--org--target" / "snapshots" / "0123"
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{}")
    (cached / "model.safetensors").write_bytes(b"\0")
    done, _ = dry_run(tmp_path, fake, model="org/target", draft="org/draft")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == [f"lookahead-runner: warning: speculation.draft_model: 'org/draft' is not in the Hugging Face "
                        f"cache ({tmp_path / 'hub'}; 3.0 MiB of it downloaded so far): the first server life with "
                        "K > 0 downloads it before it is ready, within server.ready_timeout_s = 600 s"]
    offline, _ = dry_run(tmp_path, fake, model="org/target", draft="org/draft", env={"HF_HUB_OFFLINE": "1"})
    assert "HF_HUB_OFFLINE is set" in refused(offline, tmp_path, fake)


def test_rate_stages_without_an_slo_are_a_warning_naming_what_the_verdict_reads(tmp_path, fixtures_dir):
    fake = Fake(tmp_path, fixtures_dir)
    done, _ = dry_run(tmp_path, fake, stage="{ rate = 3.0, duration_s = 5 }")
    assert done.returncode == 0, done.stderr
    assert ("lookahead-runner: warning: decision.slo is empty: at the rate stages the verdict reads the e2e latency "
            "at p90 (decision.latency_percentile) alone: no SLO is checked and no K's capacity within an SLO is found; "
            "set decision.slo, e.g. slo = { ttft_p90_ms = 500, tpot_p90_ms = 50 }") in done.stderr.splitlines()
    with_slo, _ = dry_run(tmp_path, fake, stage="{ rate = 3.0, duration_s = 5 }",
                          extra="[decision]\nslo = { e2e_p90_ms = 9000 }")
    assert with_slo.returncode == 0 and "warning" not in with_slo.stderr, with_slo.stderr
    # Locust's processes are planned for the requests in flight, not for users the config has none of
    assert "1 planned for 3 requests in flight (3 requests per second for a second)" in done.stdout
    assert " users " not in done.stdout.splitlines()[1]


def test_the_text_names_the_engine_and_the_port_each_life_gets(tmp_path, fixtures_dir):
    fake = Fake(tmp_path, fixtures_dir)
    done, _ = dry_run(tmp_path, fake)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("vLLM 0.32.0 (V1 engine): flags read from `serve --help=all`; K written as "
                        "--spec-method/--spec-model/--spec-tokens; no --num-lookahead-slots")
    assert "server.port = 0: each server life listens on a free port picked when it starts (PORT below)" in lines
    argv = [line for line in lines if line.startswith("k4/r0: ")]
    assert argv and "--port PORT " in argv[0] and "8000" not in argv[0]
    fixed, _ = dry_run(tmp_path, fake, port=8123)
    assert [line for line in fixed.stdout.splitlines() if line.startswith("k4/r0: ") and "--port 8123 " in line]


def test_a_vllm_that_fails_its_version_names_the_command_its_exit_code_and_its_last_line(tmp_path, fixtures_dir):
    fake = Fake(tmp_path, fixtures_dir, VERSION_BROKEN)
    done, _ = dry_run(tmp_path, fake)
    assert refused(done, tmp_path, fake) == (
        f"lookahead-runner: server.command: `{fake.command} --version` exited with code 1 and printed no version: "
        "importlib.metadata.PackageNotFoundError: No package metadata was found for vllm; check that vLLM runs in "
        "the environment server.command gives it")


def test_a_rate_only_config_on_a_real_server_plans_the_measure_until_decided_default(tmp_path, fixtures_dir):
    """Issues 48/49: rate stages only, no strategy and no repeats given, on a vLLM whose restart spread is unknown:
    the dry run plans the adaptive sweep at the target rate, says why, and its lives at best and at worst."""
    fake = Fake(tmp_path, fixtures_dir)
    done, _ = dry_run(tmp_path, fake, stage="{ rate = 2.0, duration_s = 30 }, { rate = 6.0, duration_s = 30 }",
                      extra="[decision]\nslo = { e2e_p90_ms = 9000 }\ntarget_rate = 6.0")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (plan,) = [line for line in lines if line.startswith("adaptive sweep")]
    assert plan.startswith("adaptive sweep (no sweep.strategy given, rate stages on a server whose restart spread is "
                           "unknown: one life per K would decide only a gain over K=0 of about +35%"), plan
    assert "where the verdict at 6 req/s is least sure" in plan and "a repeat runs the 6 req/s stage alone" in plan
    (expected,) = [line for line in lines if line.startswith("expected: ")]
    assert expected.startswith("expected: at most 4 server lives (adaptive: each chosen on what is measured), and up "
                               "to 4 capacity probes beside them"), expected
    # a K's first life 60 s of stages, a repeat 30 s; the spread unknown, both K twice before any stop: with two K the
    # lives of the grid of 2 repeats, at 2 x 60 + 2 x 30 s of load instead of its 4 x 60; at worst, with the SLO, two
    # capacity probes per K beside them, 30 s each
    assert "at best 4 lives (~3.0 server-minutes of load)" in expected and expected.endswith("at worst 8 (~5.0)")
    assert fake.served() == []
