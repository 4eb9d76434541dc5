"""load.repeat_mode = "same-server": every repeat of a setting on one server process, each repeat
measured into its own folder with its own closed token window; a server that dies fails the
repeats it leaves unmeasured."""
import csv
import json
import subprocess
import sys
import uuid

import pytest
from fault_kit import processes_of
from test_runner_lives import sweep_toml

pytestmark = pytest.mark.e2e


def run_sweep(tmp_path, toml):
    config = tmp_path / "sweep.toml"
    config.write_text(toml)
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config),
                           "--out", str(tmp_path / "runs"), "--no-early-stop"],
                          capture_output=True, text=True, timeout=300)
    (run_dir,) = list((tmp_path / "runs").iterdir())
    return done, run_dir


def status(run_dir, life):
    return json.loads((run_dir / life / "status.json").read_text())


def test_same_server_measures_every_repeat_on_one_server(tmp_path):
    model = f"sim/same-{uuid.uuid4().hex[:8]}"
    done, run_dir = run_sweep(tmp_path, sweep_toml(model, "[0, 2]", [(4, 3), (8, 3)], 8)
                              .replace("warmup_s = 1.0", "warmup_s = 1.0\nrepeats = 3\nrepeat_mode = \"same-server\""))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("starting the server") == 2
    assert done.stdout.count("on the same server") == 4
    for setting in ("k0", "k2"):
        server = json.loads((run_dir / setting / "r0/server.json").read_text())
        assert server["exit_code"] is not None and server["ready_s"] > 0
        for repeat in (1, 2):
            assert not (run_dir / setting / f"r{repeat}/server.json").exists()
            assert status(run_dir, f"{setting}/r{repeat}")["server_life"] == f"{setting}/r0"
        # one process served all three: its log shows one startup
        assert (run_dir / setting / "r0/server.log").read_text().count("Application startup complete") == 1
    with open(run_dir / "lives.csv") as handle:
        lives = list(csv.DictReader(handle))
    assert len(lives) == 6 and {life["status"] for life in lives} == {"done"}
    # each repeat's window is closed on its own: client tokens equal the server counter's delta
    assert all(int(float(life["difference"])) == 0 and int(float(life["client_output_tokens"])) > 0
               for life in lives)
    summary = (run_dir / "summary.csv").read_text().splitlines()
    assert len(summary) == 1 + 2 * 3 * 2
    decision = json.loads((run_dir / "decision.json").read_text())
    (stability,) = [item for item in decision["checklist"] if item["name"] == "repeat stability"]
    assert "over 3 repeats" in stability["evidence"] and "all repeats on one server life" in stability["evidence"]
    assert not processes_of(model)


def test_same_server_death_fails_the_repeats_left(tmp_path):
    model = f"sim/same-dies-{uuid.uuid4().hex[:8]}"
    toml = sweep_toml(model, "[0]", [(4, 4)], 4).replace(
        '"tight-kv"]', '"tight-kv", "--sim-fault", "die-after=2"]').replace(
        "warmup_s = 1.0", "warmup_s = 1.0\nrepeats = 3\nrepeat_mode = \"same-server\"")
    done, run_dir = run_sweep(tmp_path, toml)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    first = status(run_dir, "k0/r0")
    assert first["state"] == "failed" and "died" in first["reason"]
    for repeat in (1, 2):
        later = status(run_dir, f"k0/r{repeat}")
        assert later["state"] == "failed"
        assert later["reason"].startswith("not measured: the server of k0/r0 failed in k0/r0")
    assert not processes_of(model)
