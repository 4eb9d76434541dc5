"""Every form a secret is known to come in, through every output of a sweep: a launcher's `NAME=VALUE` under a name
no `server.secret_env` lists, `server.env` pairs under names that say they hold a secret, a key of a JSON flag value,
`--api-key` and `--hf-token`. None of them is in the dry run, the console, any file of the run folder (plan.json,
server.json, the logs, the report, made again by `report` too), the restart-spread ledger's cache folder and the
fingerprint it keys on, the live view's pages, or (for the two vLLM flags, which travel in the server's environment)
any command line of the process table."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import pandas as pd
import psutil
import pytest
from fault_kit import FAST, FAULT_SIM, FINISHED, cli, kill_all, no_traceback, only_run_dir, survivors, sweep_toml, \
    write_config
from test_secret_args import in_text, leaks, secret

from lookahead_runner.config.loading import load_config
from lookahead_runner.runfolder.spread_ledger import fingerprint

pytestmark = pytest.mark.e2e

RUN_TIMEOUT_S = 240.0
LIVE_PAGES = ("/?tab=lookahead", "/stats/requests", "/lookahead/charts.json", "/lookahead/now.csv",
              "/lookahead/history.csv", "/lookahead/life.json")


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.read().decode("utf-8", "replace")
    except (OSError, urllib.error.HTTPError):
        return ""


def test_every_secret_form_reaches_the_server_and_no_output(tmp_path):
    key, hf, launcher, wandb, loader, openai, s3 = (secret(p) for p in ("sk", "hf", "azure", "wandb", "loader",
                                                                        "openai", "s3"))
    values = [key, hf, launcher, wandb, loader, openai, s3]
    model = f"sim/sec-forms-{uuid.uuid4().hex[:8]}"
    server = {"command": ["env", f"AZURE_OPENAI_KEY={launcher}", f"WANDB_API_KEY={wandb}", *FAULT_SIM],
              "extra_args": [*FAST, "--api-key", key, "--hf-token", hf,
                             "--model-loader-extra-config", json.dumps({"token": loader, "n": 1})]}
    toml = sweep_toml(model, [0, 2], stages=((2, 4),), load={"preflight_s": 1.5}, server=server,
                      env={"OPENAI_KEY": openai, "S3_CREDENTIALS": s3})
    toml += "max_client_lag_p99_ms = 250\n"  # a busy host (CI voided every window at 52 ms); not under test here
    config = write_config(tmp_path, toml)
    cache = tmp_path / "cache"
    try:
        dry = cli("sweep", "--config", str(config), "--dry-run", env={"XDG_CACHE_HOME": str(cache)}, timeout=60)
        assert dry.returncode == 0, dry.stderr
        assert in_text(dry.stdout + dry.stderr, values) == []

        runner = subprocess.Popen([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config), "--out",
                                   str(tmp_path / "runs"), "--web"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=os.environ | {"XDG_CACHE_HOME": str(cache)}, start_new_session=True)
        stdout: list[str] = []

        def read() -> None:
            for line in runner.stdout:
                stdout.append(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        pages, command_lines, server_env = [], set(), {}
        url = None
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while runner.poll() is None and time.monotonic() < deadline:
            found = re.search(r"(http://127\.0\.0\.1:\d+)/\?tab=lookahead&token=([\w-]+)", "".join(stdout))
            url = url or (found and found.groups())
            if url:
                pages += [_get(f"{url[0]}{page}{'&' if '?' in page else '?'}token={url[1]}") for page in LIVE_PAGES]
            for process in psutil.process_iter(["cmdline", "environ"]):
                cmdline = process.info["cmdline"] or []
                if any(model in part for part in cmdline):
                    command_lines.add(" ".join(cmdline))
                    if "serve" in cmdline and process.info["environ"]:
                        server_env = process.info["environ"]
            time.sleep(0.5)
        runner.wait(timeout=30)
        reader.join(timeout=10)
        stderr = runner.stderr.read()
        output = "".join(stdout) + stderr
        no_traceback(output)
        assert runner.returncode in FINISHED, output[-3000:]
        assert in_text(output, values) == []
        run_dir = only_run_dir(tmp_path / "runs")
        assert url and any('"life"' in page for page in pages), "the live view was not read"
        assert in_text("\n".join(pages), values) == [], "the live view"
        assert leaks(run_dir, values) == []
        rendered = cli("report", str(run_dir), env={"XDG_CACHE_HOME": str(cache)}, timeout=120)
        assert rendered.returncode == 0, rendered.stderr[-2000:]
        assert in_text(rendered.stdout + rendered.stderr, values) == [] and leaks(run_dir, values) == []
        assert (leaks(cache, values) if cache.exists() else []) == [], "the ledger's cache folder"
        # the ledger keys each server on its fingerprint, made from the config as given (the simulator's own spread
        # is known, so a sweep on it writes no ledger: the fingerprint is checked as a sweep on vLLM would make it)
        print_ = json.dumps(fingerprint(load_config(config), "0.32.0", "1 x NVIDIA H100 80GB HBM3"))
        assert in_text(print_, values) == [] and "${AZURE_OPENAI_KEY}" in print_, "the ledger's fingerprint"

        # the process table: the two vLLM flags' values on no command line (the JSON value and the launcher's
        # assignments must stay on theirs), yet the server got them, and the load sent the key
        assert command_lines and in_text("\n".join(command_lines), [key, hf]) == []
        assert server_env.get("VLLM_API_KEY") == key and server_env.get("HF_TOKEN") == hf
        assert server_env.get("OPENAI_KEY") == openai and server_env.get("AZURE_OPENAI_KEY") == launcher
        recorded = json.loads((run_dir / "k0/r0/server.json").read_text())
        assert "--hf-token" not in recorded["argv"] and recorded["argv"][:3] == [
            "env", "AZURE_OPENAI_KEY=${AZURE_OPENAI_KEY}", "WANDB_API_KEY=${WANDB_API_KEY}"]
        assert json.loads(recorded["argv"][recorded["argv"].index("--model-loader-extra-config") + 1]) == {
            "token": "${TOKEN}", "n": 1}
        requests = pd.read_csv(run_dir / "k0/r0/requests.csv")
        assert len(requests) > 0 and requests["ok"].all(), "the load did not send the server's key"
        assert survivors(model, str(run_dir)) == []
    finally:
        kill_all(model)
