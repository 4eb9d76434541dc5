"""[cluster]: strict keys, the GPUs a life asks for, and engine = "ray" without Ray."""
import subprocess
import sys

import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.config.cluster import check_ray_installed, parallel_gpus


def test_default_is_local_and_one_gpu_per_life():
    config = config_from_dict({})
    assert config.cluster.engine == "local"
    assert config.cluster.life_gpus(config.server.extra_args) == 1


@pytest.mark.parametrize("args, gpus", [
    ([], 1),
    (["--tensor-parallel-size", "4"], 4),
    (["--tensor-parallel-size=2", "--pipeline-parallel-size", "2"], 4),
    (["-tp", "8", "--max-num-seqs", "64"], 8),
    (["--pipeline-parallel-size"], 1),   # no value: vLLM's own error, not ours
    # data parallel replicas each hold tensor x pipeline GPUs (vLLM's world_size_across_dp; its plot_pareto
    # divides by TP x PP x DP too); -dpl: the replicas on this node; prefill context parallel widens each one
    (["-tp", "2", "--data-parallel-size", "4"], 8),
    (["-dp=2"], 2),
    (["--data-parallel-size", "4", "--data-parallel-size-local", "2", "-tp", "2"], 4),
    (["--tensor_parallel_size", "2", "-pcp", "2"], 4),
])
def test_gpus_per_life_defaults_to_the_parallel_sizes(args, gpus):
    assert parallel_gpus(args) == gpus


def test_gpus_per_life_overrides_the_parallel_sizes(ray_installed):
    config = config_from_dict({"cluster": {"engine": "ray", "gpus_per_life": 0, "gpus": 2},
                               "server": {"extra_args": ["--tensor-parallel-size", "4"]}})
    assert config.cluster.life_gpus(config.server.extra_args) == 0


@pytest.mark.parametrize("cluster, field", [
    ({"engine": "slurm"}, "cluster.engine"),
    ({"nodes": 2}, "cluster.nodes: unknown key"),
    ({"address": "auto"}, "set cluster.engine = \"ray\""),
    ({"engine": "ray", "address": "auto", "gpus": 2}, "remove cluster.gpus or the address"),
    ({"engine": "ray", "address": "head-node"}, "cluster.address: 'head-node': give \"auto\""),
    ({"engine": "ray", "address": "ray://head:port"}, "cluster.address"),
    ({"engine": "ray", "gpus": -1}, "cluster.gpus"),
    ({"engine": "ray", "cpus_per_life": 0}, "cluster.cpus_per_life"),
])
def test_bad_cluster_is_one_line_naming_the_field(cluster, field):
    with pytest.raises(ConfigError) as err:
        config_from_dict({"cluster": cluster})
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("address", ["auto", "ray://head:10001", "10.0.0.1:6379"])
def test_ray_addresses(address, ray_installed):
    assert config_from_dict({"cluster": {"engine": "ray", "address": address}}).cluster.address == address


def test_ray_cannot_reach_a_running_server():
    with pytest.raises(ConfigError, match="server.url"):
        config_from_dict({"cluster": {"engine": "ray"}, "server": {"url": "http://127.0.0.1:8000"},
                          "speculation": {"k": [2]}})


def test_ray_engine_without_ray_names_the_install():
    config = config_from_dict({})
    ray = config.model_copy(update={"cluster": config.cluster.model_copy(update={"engine": "ray"})})
    with pytest.raises(ConfigError) as err:
        check_ray_installed(ray.cluster, "sweep.toml", find=lambda name: None)
    assert str(err.value) == ("sweep.toml: cluster.engine = \"ray\" needs Ray on this machine: "
                              "pip install 'lookahead-runner[ray]' (or set cluster.engine = \"local\")")
    check_ray_installed(config.cluster, "sweep.toml", find=lambda name: None)  # local needs no Ray


def test_cli_without_ray_exits_2_with_one_line_and_starts_nothing(tmp_path):
    """A Python where Ray cannot be found (find_spec answers None for it): exit 2, one line, no run folder."""
    (tmp_path / "sweep.toml").write_text(f"out = \"{tmp_path / 'reports'}\"\n[cluster]\nengine = \"ray\"\ngpus = 2\n")
    done = subprocess.run([sys.executable, "-c",
                           "import importlib.util as u, sys\n_f = u.find_spec\n"
                           "u.find_spec = lambda name, *a: None if name == 'ray' else _f(name, *a)\n"
                           "from lookahead_runner.cli import main\n"
                           f"sys.exit(main(['sweep', '--config', r'{tmp_path / 'sweep.toml'}']))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install 'lookahead-runner[ray]'" in lines[0], lines
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("server, load, field, fix", [
    ({"memory_source": "dcgm", "dcgm_url": "http://10.0.0.1:9400/metrics"}, {}, "server.memory_source", "\"nvml\""),
    ({"dcgm_url": "http://10.0.0.1:9400/metrics"}, {}, "server.memory_source", "without server.dcgm_url"),
    ({"port": 8000}, {}, "server.port = 8000", "server.port = 0"),
    ({"host": "0.0.0.0"}, {}, "server.host = '0.0.0.0'", "server.host = \"127.0.0.1\""),
    ({"host": "10.0.0.5"}, {}, "server.host = '10.0.0.5'", "server.host = \"127.0.0.1\""),
    ({"cpus": "0-1"}, {}, "server.cpus = '0-1'", "remove it"),
    ({}, {"cpus": "2"}, "load.cpus = '2'", "remove it"),
    ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, {}, "server.env.CUDA_VISIBLE_DEVICES = '0'", "remove it"),
])
def test_what_slots_sharing_a_node_cannot_give_is_one_line_before_anything_starts(server, load, field, fix,
                                                                                   ray_installed):
    """DCGM sums a host's GPUs (other slots' servers in each life's memory); a fixed port collides between slots;
    the load goes to 127.0.0.1 on the slot's node; CPU lists are the driver's and nothing is pinned on a slot;
    CUDA_VISIBLE_DEVICES in server.env would replace the GPUs Ray gave each slot (every server on those)."""
    with pytest.raises(ConfigError) as err:
        config_from_dict({"cluster": {"engine": "ray", "gpus": 2}, "server": server, "load": load})
    line = str(err.value)
    assert field in line and fix in line and "\n" not in line, line
    local = config_from_dict({"server": server, "load": load})  # the same keys are fine one life at a time
    assert local.cluster.engine == "local"


def test_a_loopback_server_on_a_free_port_with_nvml_runs_on_a_cluster(ray_installed):
    for host in ("127.0.0.1", "localhost", "::1"):
        config = config_from_dict({"cluster": {"engine": "ray", "gpus": 2},
                                   "server": {"host": host, "memory_source": "nvml"}})
        assert config.server.port == 0


def test_cli_refuses_a_fixed_port_on_a_cluster_in_one_line_and_starts_nothing(tmp_path, capsys):
    pytest.importorskip("ray", reason="the config check runs where Ray is installed: pip install '.[ray]'")
    from lookahead_runner.cli import main

    (tmp_path / "sweep.toml").write_text(f"out = \"{tmp_path / 'reports'}\"\n[server]\nport = 8000\n"
                                         "[cluster]\nengine = \"ray\"\ngpus = 2\n")
    # --dry-run: were the check gone, this would start Ray and probe, not run a sweep
    assert main(["sweep", "--dry-run", "--config", str(tmp_path / "sweep.toml")]) == 2
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert len(lines) == 1 and "server.port = 8000" in lines[0] and lines[0].startswith("lookahead-runner: "), lines
    assert not (tmp_path / "reports").exists()
