"""Secrets given the way vLLM users give them (`--api-key K1 K2`, `--api-key=K`, `--hf-token V`, a
user-listed flag, `HF_TOKEN=...` inside a launcher's argv) reach the server and no file, printed line
or report of a finished or an interrupted run; a resumed run takes them from the environment again.

Each check greps every file of the run folder for the secret in every encoding it could be written
in: as is, JSON-escaped, HTML-escaped, URL-quoted and as Python's repr (vLLM's "non-default args" log
line). The secrets carry characters that each of those encodings changes."""
import html
import json
import re
import signal
import sys
import urllib.error
import urllib.request
import uuid
from urllib.parse import quote, quote_plus

import pandas as pd
import psutil
import pytest

from fault_kit import (FINISHED, FAST, FAULT_SIM, cli, interrupt, kill_all, kill_group, life_line, no_traceback,
                       only_run_dir, processes_of, start, status, survivors, sweep_toml, wait_for, write_config)
from lookahead_runner.config.masking import Secrets
from lookahead_runner.run.life.server import ServerError, ServerProcess

pytestmark = pytest.mark.e2e


def secret(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}<&>\"'\\/+="


def forms(value: str) -> set[str]:
    return {value, json.dumps(value)[1:-1], html.escape(value), html.escape(value, quote=False),
            quote(value, safe=""), quote_plus(value), repr(value)[1:-1], repr([value])[2:-2]}


def leaks(run_dir, values: list[str]) -> list[str]:
    """'file: form' for every file of the run folder holding a secret in any encoding."""
    found = []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(run_dir)}: {form!r}" for value in values for form in forms(value)
                  if form.encode() in data]
    return found


def in_text(text: str, values: list[str]) -> list[str]:
    return [form for value in values for form in forms(value) if form in text]


def pasted_command(report: str, element_id: str) -> str:
    match = re.search(rf'<pre id="{element_id}">(.*?)</pre>', report, re.DOTALL)
    assert match, f"no {element_id} in the report"
    return html.unescape(match[1])


def test_secrets_in_vllm_flags_and_a_launcher_reach_the_server_and_no_file(tmp_path):
    """A launcher template (`env HF_TOKEN=... python sim serve ...`, as `docker run -e` would be) with two
    API keys, an HF token and a user-listed secret flag: the server gets every value (its own log line
    shows where each stood, masked), the load sends the first key, and nothing holds any of them."""
    keys = [secret("sk-one"), secret("sk-two")]
    hf_flag, hf_env, revision = secret("hf-flag"), secret("hf-env"), secret("rev")
    values = [*keys, hf_flag, hf_env, revision]
    model = f"sim/sec-args-{uuid.uuid4().hex[:8]}"
    template = ["env", f"HF_TOKEN={hf_env}", *FAULT_SIM, "serve", "{model}", "--host", "{host}", "--port", "{port}",
                "{args}"]
    extra = [*FAST, "--api-key", *keys, "--hf-token", hf_flag, "--code-revision", revision]
    toml = sweep_toml(model, [0, 2], stages=((2, 3),), load={"preflight_s": 1.5}, server={  # its files are grepped too
        "argv_template": template, "extra_args": extra, "secret_flags": ["--code-revision"], "secret_env": ["HF_TOKEN"]})
    config = write_config(tmp_path, toml)
    try:
        dry = cli("sweep", "--config", str(config), "--dry-run", timeout=60)
        assert dry.returncode == 0, dry.stderr
        assert in_text(dry.stdout + dry.stderr, values) == []
        assert 'env HF_TOKEN="$HF_TOKEN" ' in dry.stdout
        assert '--api-key "$VLLM_API_KEY" "$VLLM_API_KEY_2" --hf-token "$HF_TOKEN_2" --code-revision "$CODE_REVISION"' \
            in dry.stdout

        done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=180)
        no_traceback(done.stdout, done.stderr)
        assert done.returncode in FINISHED, done.stderr[-2000:]
        assert in_text(done.stdout + done.stderr, values) == []
        run_dir = only_run_dir(tmp_path / "runs")
        assert leaks(run_dir, values) == []

        requests = pd.read_csv(run_dir / "k0/r0/requests.csv")
        assert len(requests) > 0 and requests["ok"].all(), "the load did not send the server's own key"
        (args_line,) = [line for line in (run_dir / "k0/r0/server.log").read_text().splitlines()
                        if "non-default args:" in line]
        for shown in ("'api_key': ['${VLLM_API_KEY}', '${VLLM_API_KEY_2}']", "'hf_token': '${HF_TOKEN_2}'",
                      "'code_revision': '${CODE_REVISION}'"):
            assert shown in args_line, args_line  # the server printed the value: the runner masked it
        server = json.loads((run_dir / "k0/r0/server.json").read_text())
        assert server["argv"][:2] == ["env", "HF_TOKEN=${HF_TOKEN}"]
        plan = json.loads((run_dir / "plan.json").read_text())
        assert plan["config"]["server"]["extra_args"][-6:] == [
            "--api-key", "${VLLM_API_KEY}", "${VLLM_API_KEY_2}", "--hf-token", "${HF_TOKEN_2}", "--code-revision",
            "${CODE_REVISION}"][-6:]
        # each life's paste-ready command (a recommendation's is the same text; 3 s of load decides nothing)
        command = pasted_command((run_dir / "report.html").read_text(), "argv-k2-r0")
        assert command.startswith('env HF_TOKEN="$HF_TOKEN" ') and '--api-key "$VLLM_API_KEY" "$VLLM_API_KEY_2"' in command
        assert survivors(model, str(run_dir)) == []
    finally:
        kill_all(model)


def _get(url: str, key: str = "") -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_interrupted_run_keeps_the_key_out_and_resume_takes_it_from_the_environment(tmp_path, monkeypatch):
    """`--api-key=K` in extra_args, no launcher: the runner hands K to the server in VLLM_API_KEY (so it is
    on no command line), the server enforces it, the load sends it. Ctrl-C mid-load: no file holds K.
    `--resume` without VLLM_API_KEY stops with one line naming it; with it, the run finishes, still clean."""
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    key = secret("sk-int")
    model = f"sim/sec-int-{uuid.uuid4().hex[:8]}"
    # a 12 s stage: the checks below take seconds on a busy host, and Ctrl-C must still land mid-load
    config = write_config(tmp_path, sweep_toml(model, [0, 2], stages=((2, 12),),
                                                server={"extra_args": [*FAST, f"--api-key={key}"]}))
    runs = tmp_path / "runs"
    runner = start("sweep", "--config", str(config), "--out", str(runs))
    try:
        wait_for(lambda: runs.exists() and any(runs.iterdir()), 30, "the run folder")
        run_dir = only_run_dir(runs)
        requests_csv = run_dir / "k0/r0/requests.csv"
        wait_for(lambda: requests_csv.exists() and len(requests_csv.read_text().splitlines()) > 2, 60,
                 "requests of the first setting")
        server = json.loads((run_dir / "k0/r0/server.json").read_text())
        assert "--api-key" not in " ".join(server["argv"]) and server["secret_env"] == ["VLLM_API_KEY"]
        process = psutil.Process(server["pid"])
        assert process.environ().get("VLLM_API_KEY") == key, "the server did not get the key"
        for proc in processes_of(model):  # the server and Locust: no command line shows the key
            assert in_text(" ".join(proc.cmdline()), [key]) == [], proc.cmdline()
        assert _get(server["base_url"] + "/v1/models") == 401, "the server must enforce the key"
        assert _get(server["base_url"] + "/v1/models", key) == 200

        interrupt(runner, signal.SIGINT)
        out, err = runner.communicate(timeout=90)
        no_traceback(out, err)
        assert runner.returncode == 130, (out[-2000:], err[-2000:])
        assert in_text(out + err, [key]) == []
        assert leaks(run_dir, [key]) == []
        plan = json.loads((run_dir / "plan.json").read_text())
        assert "--api-key=${VLLM_API_KEY}" in plan["lives"][0]["argv"]

        refused = cli("sweep", "--resume", str(run_dir), timeout=60)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.strip() == (
            f"lookahead-runner: {run_dir / 'plan.json'}: server.extra_args: ${{VLLM_API_KEY}} is read from the "
            "environment, but VLLM_API_KEY is not set (secrets are kept only by name); export VLLM_API_KEY=... and "
            "run again")
        assert status(run_dir, "k0/r0")["state"] == "running", "nothing may start without the key"

        resumed = cli("sweep", "--resume", str(run_dir), env={"VLLM_API_KEY": key}, timeout=180)
        no_traceback(resumed.stdout, resumed.stderr)
        assert resumed.returncode in FINISHED, resumed.stderr[-2000:]
        assert life_line(resumed.stdout, "k0/r0").endswith("k0/r0: done")
        requests = pd.read_csv(requests_csv)
        assert len(requests) > 0 and requests["ok"].all()
        assert in_text(resumed.stdout + resumed.stderr, [key]) == []
        assert leaks(run_dir, [key]) == []
        assert survivors(model, str(run_dir)) == []
    finally:
        kill_group(runner)
        kill_all(model)


def test_server_log_is_masked_complete_and_flushed_when_the_server_crashes(tmp_path):
    """The server's output goes through a pipe: a secret is masked even in a 100 kB line without a line
    break, and the last words of a crash (no newline, then exit) reach the log and the error line."""
    key = secret("sk-crash")
    script = ("import os, sys; key = sys.argv[2]; print('non-default args:', {'api_key': [key]}, flush=True); "
              "sys.stdout.write('x' * 100000 + key + 'y' * 10 + chr(10)); "
              "sys.stdout.write('ValueError: refused ' + key); sys.stdout.flush(); os._exit(1)")
    secrets = Secrets.for_rules()
    argv = secrets.mask_argv([sys.executable, "-c", script, "--api-key", key])
    assert key not in argv
    server = ServerProcess(argv, "http://127.0.0.1:9", tmp_path / "server.log", secrets=secrets, stop_grace_s=2)
    with pytest.raises(ServerError) as failed:
        with server:
            server.wait_until_ready(30)
    message = str(failed.value)
    assert message.splitlines()[0] == "server exited with code 1 before it was ready: ValueError: refused ${VLLM_API_KEY}"
    log = (tmp_path / "server.log").read_text()
    assert in_text(message + log, [key]) == []
    assert "non-default args: {'api_key': ['${VLLM_API_KEY}']}" in log
    assert "x" * 100000 + "${VLLM_API_KEY}" + "y" * 10 + "\n" in log
    assert log.endswith("ValueError: refused ${VLLM_API_KEY}")
    assert json.loads((tmp_path / "server.json").read_text())["argv"][-1] == "${VLLM_API_KEY}"
