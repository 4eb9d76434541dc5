"""The restart spread ledger's fingerprint and file under bad input: no secret reaches the ledger or its hash, the
server's binary is part of its identity, and a corrupt entry is one warning line, never a crash."""
import json
import math

import pytest

from lookahead_runner.config import config_from_dict
from lookahead_runner.runfolder import spread_ledger as ledger

GPU = "1 x NVIDIA H100 80GB HBM3"
KEY = "sk-very-secret-0123456789"


def config(server=None, **sections):
    data = {"server": {"command": ["vllm"], "model": "org/target-8b", "extra_args": ["--max-num-seqs", "64"]}
            | (server or {}),
            "speculation": {"k": [0, 4], "draft_model": "org/draft-1b"}, "load": {"stages": [{"users": 4, "duration_s": 10}]}} | sections
    return config_from_dict(data)


@pytest.mark.parametrize("server", [
    {"extra_args": ["--max-num-seqs", "64", "--api-key", KEY]},
    {"extra_args": ["--max-num-seqs", "64", f"--api-key={KEY}"]},
    {"extra_args": ["--max-num-seqs", "64", "--api-key", "first-key-abcdef", KEY]},
    {"extra_args": ["--max-num-seqs", "64", "--hf-token", KEY]},
    {"extra_args": ["--max-num-seqs", "64", "--my-secret", KEY], "secret_flags": ["--my-secret"]},
    {"env": {"OPENAI_API_KEY": KEY}},
    {"env": {"MY_CREDENTIAL": KEY}, "secret_env": ["MY_CREDENTIAL"]},
    {"command": ["docker", "run", "-e", f"MY_CREDENTIAL={KEY}", "vllm/vllm-openai"], "secret_env": ["MY_CREDENTIAL"]},
])
def test_no_secret_reaches_the_fingerprint_its_hash_or_the_ledger_file(server, cache_dir):
    cfg = config(server)
    print_ = ledger.fingerprint(cfg, "0.32.0", GPU)
    assert KEY not in json.dumps(print_) and "first-key" not in json.dumps(print_)
    # another key is the same server: the hash carries nothing of the key
    other = config({k: json.loads(json.dumps(v).replace(KEY, "sk-another-key-987654321")) for k, v in server.items()})
    assert ledger.key_of(ledger.fingerprint(other, "0.32.0", GPU)) == ledger.key_of(print_)
    use, _ = ledger.use_for_run(cfg, "0.32.0", True, gear=GPU)
    ledger.remember(use, "run-1", 4, 0.002, 2, 4)
    assert KEY not in ledger.ledger_path().read_text()


def test_another_binary_is_another_server():
    base = ledger.key_of(ledger.fingerprint(config(), "0.32.0", GPU))
    other = config({"command": ["/opt/vllm-nightly/bin/vllm"]})
    assert ledger.key_of(ledger.fingerprint(other, "0.32.0", GPU)) != base
    template = config({"argv_template": ["docker", "run", "vllm/vllm-openai:v0.9", "{model}", "--host", "{host}",
                                         "--port", "{port}", "{args}"]})
    assert ledger.key_of(ledger.fingerprint(template, "0.32.0", GPU)) != base


GOOD = {"run_id": "run-1", "date": "2026-12-01", "users": 4, "squares": 0.002, "df": 2, "lives": 4, "rel_sd": 0.03,
        "workload": ledger.workload_key(config())}


@pytest.mark.parametrize("bad", [{"squares": math.nan}, {"squares": -0.5}, {"rel_sd": math.inf}, {"df": -1},
                                 {"squares": "0.1"}, {"df": "two"}, {"users": None}, {"levels": {"4": math.nan}},
                                 {"levels": [1, 2]}])
def test_a_corrupt_entry_is_one_warning_line_and_left_out(bad, cache_dir):
    use, _ = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    good = GOOD | {"run_id": "run-0"}
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "servers": {use.key: {"fingerprint": use.fingerprint,
                                                                    "runs": [good, GOOD | bad]}}}))
    again, said = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    warning, note = said.split("\n")
    assert warning.startswith(f"warning: the restart spread ledger {path} has 1 corrupt entry (server {use.key} run 2")
    earlier = again.earlier_spread()
    assert earlier.runs == 1 and earlier.df == 2 and math.isfinite(earlier.rel_sd)   # the good run is kept
    assert "from 1 earlier run" in note


@pytest.mark.parametrize("servers", [[1, 2], {"x": 3}, {"x": {"fingerprint": "f", "runs": []}},
                                     {"x": {"fingerprint": {}, "runs": 5}}])
def test_a_corrupt_server_is_one_warning_line(servers, cache_dir):
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "servers": servers}))
    use, said = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    assert said.count("\n") == 1 and said.startswith(f"warning: the restart spread ledger {path} ")
    assert use.earlier is None
    assert ledger.remember(use, "run-1", 4, 0.002, 2, 4, workload=ledger.workload_key(config())).startswith("warning:")
    assert ledger.use_for_run(config(), "0.32.0", True, gear=GPU)[0].earlier_spread().runs == 1


def test_a_level_that_is_not_finite_is_not_remembered(cache_dir):
    use, _ = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    ledger.remember(use, "run-1", 4, 0.002, 2, 4, levels={"0": 1.5, "4": math.nan})
    assert ledger.read_ledger(ledger.ledger_path()) [1] == ""


def test_on_a_ray_cluster_the_gpus_are_those_of_the_nodes_that_run_the_lives(monkeypatch):
    """Not the driver's (a laptop steering a GPU cluster): the probe's GPU models of a slot, counted as a local
    server's are, so one server on the same GPUs has one fingerprint wherever it runs."""
    pytest.importorskip("ray", reason="cluster.engine = 'ray' is refused without Ray (the ray extra)")
    from types import SimpleNamespace

    from lookahead_runner.run.cluster.slots import RaySlots
    from lookahead_runner.run.runner import ledger_gear

    def driver_gpus(*_):
        raise AssertionError("the driver's GPUs were read")

    monkeypatch.setattr(ledger, "nvml_visible", driver_gpus)
    ray = config(cluster={"engine": "ray", "address": "auto"})
    h100 = ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    slots = RaySlots(slots=[], seed=0, nodes=SimpleNamespace(reference=SimpleNamespace(gpu_models=h100)))
    assert ledger_gear(ray, slots) == "2 x NVIDIA H100 80GB HBM3"
    a100 = RaySlots(slots=[], seed=0, nodes=SimpleNamespace(reference=SimpleNamespace(gpu_models=("NVIDIA A100",))))
    assert ledger_gear(ray, a100) == "1 x NVIDIA A100"
    assert "not probed" in ledger_gear(ray, RaySlots(slots=[], seed=0))
    assert ledger_gear(ray, RaySlots(slots=[], seed=0, nodes=SimpleNamespace(reference=SimpleNamespace(
        gpu_models=())))) == "no GPU: a Ray node"


@pytest.mark.parametrize("changes, why", [
    ({"grid": {"flag": "--max-num-seqs", "values": ["64", "128"]}}, "a grid axis"),
    ({"load": {"stages": [{"users": 4, "duration_s": 10}], "prompt_tokens": [64, 512]}}, "workload variants"),
    ({"load": {"stages": [{"rate": 4.0, "duration_s": 10}]}}, "rate stages only")])
def test_a_run_whose_spread_is_never_remembered_never_reads_the_ledger(changes, why, cache_dir):
    """A grid axis (each value another server, none in the fingerprint), workload variants (each its own target
    users) or rate stages only (their verdict's spread is measured at the rate, no users stage's): finalize.
    remember_spread writes none for them, and none is read for them (the dry run said "no earlier run on this
    server at 0 users; this run measures it" for rate stages)."""
    use, _ = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    ledger.remember(use, "run-1", 4, 0.002, 2, 4)
    other, said = ledger.use_for_run(config(**changes), "0.32.0", True, gear=GPU)
    assert other is None and said.startswith(f"restart spread ledger: not used ({why}")


def test_here_the_gpus_are_those_the_server_takes_not_every_one_the_host_has(monkeypatch):
    """A server of tensor parallel 2 on an 8-GPU host is "2 x" (as on a Ray slot of two), whatever else is there."""
    from types import SimpleNamespace

    nvml = SimpleNamespace(nvmlDeviceGetHandleByIndex=lambda index: index,
                           nvmlDeviceGetName=lambda handle: b"NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(ledger, "nvml_visible", lambda visible: (nvml, [SimpleNamespace(index=i) for i in range(8)]))
    assert ledger.hardware(config()) == "1 x NVIDIA H100 80GB HBM3"
    assert ledger.hardware(config({"extra_args": ["--tensor-parallel-size", "2"]})) == "2 x NVIDIA H100 80GB HBM3"


def test_a_ledger_rewritten_keeps_the_unreadable_file_aside_and_a_newer_ones_is_left_alone(cache_dir):
    use, _ = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "servers": {"x": {"fingerprint": {}, "runs": [')
    assert ledger.remember(use, "run-1", 4, 0.002, 2, 4).startswith("warning:")
    assert path.with_name(path.name + ".bad").read_text().endswith('"runs": [')   # not lost
    assert ledger.read_ledger(path)[1] == ""
    newer = json.dumps({"version": ledger.LEDGER_VERSION + 1, "servers": {"y": {"runs": "a newer layout"}}})
    path.write_text(newer)
    again, said = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    assert again.earlier is None and (f"written by a newer lookahead-runner (version {ledger.LEDGER_VERSION + 1}): "
                                      "not used nor written") in said
    assert ledger.remember(use, "run-2", 4, 0.002, 2, 4).startswith("warning:") and path.read_text() == newer


def test_a_ledger_lock_held_by_a_stopped_process_is_an_error_not_a_hang(cache_dir, monkeypatch):
    import fcntl

    monkeypatch.setattr(ledger, "LOCK_WAIT_S", 0.3)
    use, _ = ledger.use_for_run(config(), "0.32.0", True, gear=GPU)
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    with open(path.with_suffix(".lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(TimeoutError, match="held by another process"):
            ledger.remember(use, "run-1", 4, 0.002, 2, 4)
    assert ledger.remember(use, "run-1", 4, 0.002, 2, 4) == ""
