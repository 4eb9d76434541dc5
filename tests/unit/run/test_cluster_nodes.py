"""A cluster's nodes compared before any life (run/cluster/nodes.py): the pure parts and the NVML facts."""
from types import SimpleNamespace

import pytest

from lookahead_runner.config import config_from_dict
from lookahead_runner.run.cluster.nodes import (NodeFacts, _gpus, cause_line, differences, model_paths, unreadable,
                                               with_node_versions)

A = NodeFacts("10.0.0.1/aaaaaaaa", "0.32.0", ("NVIDIA H100 80GB HBM3",), "550.54.15")


def node(name: str, **changes) -> NodeFacts:
    return NodeFacts(f"10.0.0.{name}/{name * 8}", **({"vllm": A.vllm, "gpu_models": A.gpu_models,
                                                     "driver": A.driver} | changes))


def test_alike_nodes_pass():
    assert differences([A, node("2"), node("3")]) == ""
    assert unreadable([A, node("2")]) == ""


def test_a_node_on_another_vllm_is_named_with_both_versions():
    line = differences([A, node("2"), node("3", vllm="0.33.0")])
    assert line.startswith("the cluster's nodes differ in vLLM (0.32.0 on 10.0.0.1/aaaaaaaa, 10.0.0.2/22222222; "
                           "0.33.0 on 10.0.0.3/33333333), refused before any life: "), line


def test_gpu_models_and_drivers_are_compared_too():
    assert "differ in GPU models (NVIDIA H100 80GB HBM3 on 10.0.0.1/aaaaaaaa; NVIDIA A100-SXM4-80GB on " in \
        differences([A, node("2", gpu_models=("NVIDIA A100-SXM4-80GB",))])
    assert "differ in NVIDIA driver (550.54.15 on 10.0.0.1/aaaaaaaa; 535.161.08 on 10.0.0.2/22222222)" in \
        differences([A, node("2", driver="535.161.08")])
    assert "no GPU on 10.0.0.2/22222222" in differences([A, node("2", gpu_models=())])


def test_vllm_is_named_before_the_gpus_when_both_differ():
    assert "differ in vLLM" in differences([A, node("2", vllm="0.33.0", driver="535.161.08")])


def test_a_failed_probe_names_its_node_first():
    line = differences([A, node("2", vllm="", error="no version number in ''"), node("3", vllm="", error="x")])
    assert line == "the vLLM probe failed on node 10.0.0.2/22222222: no version number in '' (and on 1 more node)"


def test_a_resumed_run_needs_the_version_it_was_planned_on():
    line = differences([A, node("2")], probed_version="0.31.0")
    assert line.startswith("this run was probed on vLLM 0.31.0 (plan.json) but node 10.0.0.1/aaaaaaaa runs vLLM 0.32.0")
    assert differences([A, node("2")], probed_version="0.32.0") == ""


def test_an_unreadable_model_path_names_the_node_and_counts_the_others():
    line = unreadable([A, node("2", unreadable=("server.model = /models/x",)),
                       node("3", unreadable=("server.model = /models/x",))])
    assert line == ("server.model = /models/x: not readable on node 10.0.0.2/22222222 (and 1 more node); put it at "
                    "that path on every node, or give a model name each node can download")


def test_only_paths_are_checked_a_hub_name_is_downloaded():
    config = config_from_dict({"server": {"model": "/models/llama-8b"},
                               "speculation": {"k": [0, 2], "draft_model": "meta-llama/Llama-3.2-1B"}})
    assert model_paths(config) == {"server.model": "/models/llama-8b"}
    config = config_from_dict({"server": {"model": "Qwen/Qwen3-8B"},
                               "speculation": {"k": [0, 2], "draft_model": "~/drafts/tiny"}})
    assert model_paths(config) == {"speculation.draft_model": "~/drafts/tiny"}
    ngram = config_from_dict({"speculation": {"k": [0, 2], "method": "ngram", "draft_model": "./draft"}})
    assert model_paths(ngram) == {}  # ngram has no draft model to load


class FakeNvml:
    """Two GPUs of different models; NVML numbers them 0 and 1."""

    NVMLError = RuntimeError
    names = {0: b"NVIDIA H100 80GB HBM3", 1: "NVIDIA A100-SXM4-80GB"}

    def nvmlInit(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return b"550.54.15"

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return SimpleNamespace(index=index)

    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-{handle.index}aaaa"

    def nvmlDeviceGetName(self, handle):
        return self.names[handle.index]


def test_gpu_models_are_those_of_the_visible_gpus_only(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1")
    assert _gpus(FakeNvml()) == (("NVIDIA A100-SXM4-80GB",), "550.54.15")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _gpus(FakeNvml()) == (("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"), "550.54.15")


def test_no_nvml_is_a_cpu_node():
    class Broken(FakeNvml):
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    assert _gpus(Broken()) == ((), "")


def test_nodes_that_differ_in_lookahead_runner_or_python_are_refused():
    """The analysis of a life runs on its node: another lookahead-runner or Python there is a hidden factor too."""
    a, b = node("1", runner="0.1.0", python="3.11.7"), node("2", runner="0.2.0", python="3.11.7")
    assert "the cluster's nodes differ in lookahead-runner (0.1.0 on 10.0.0.1/11111111; 0.2.0 on " \
           "10.0.0.2/22222222), refused before any life" in differences([a, b])
    c = node("3", runner="0.1.0", python="3.10.12")
    assert "differ in Python (3.11.7 on 10.0.0.1/11111111; 3.10.12 on 10.0.0.3/33333333)" in differences([a, c])
    assert differences([a, node("4", runner="0.1.0", python="3.11.7")]) == ""


def test_every_slot_s_gpus_are_compared_not_one_slot_per_node():
    """Two slots of one node on GPUs of two models (a mixed box): the slots are named, with their GPUs."""
    one = node("1", slot="10.0.0.1/11111111 [GPU-a]")
    other = node("1", slot="10.0.0.1/11111111 [GPU-b]", gpu_models=("NVIDIA A100-SXM4-80GB",))
    line = differences([one, other])
    assert line.startswith("the cluster's slots differ in GPU models (NVIDIA H100 80GB HBM3 on 10.0.0.1/11111111 "
                           "[GPU-a]; NVIDIA A100-SXM4-80GB on 10.0.0.1/11111111 [GPU-b])"), line


def test_a_slot_carries_its_nodes_vllm_probed_by_another_slot_there():
    probed, unprobed = node("1", slot="s1"), node("1", slot="s2", vllm="")
    assert with_node_versions([probed, unprobed])[1].vllm == A.vllm
    assert differences(with_node_versions([probed, unprobed, node("2")])) == ""


def test_a_ray_error_is_told_by_its_cause_not_rays_banner():
    ray = pytest.importorskip("ray", reason="Ray's exceptions: pip install 'lookahead-runner[ray]'")
    died = ray.exceptions.ActorDiedError()
    died.error_msg = ("The actor died because of an error raised in its creation task, \x1b[36mray::SlotWorker.__init__()"
                      "\x1b[39m (pid=1, ip=10.0.0.2)\n  File \"x.py\", line 1\nRuntimeError: The actor with name "
                      "SlotWorker failed to import on the worker.\n\nImportError: No module named 'lookahead_runner'")
    assert cause_line(died) == "ImportError: No module named 'lookahead_runner'"
    unavailable = ray.exceptions.ActorUnavailableError("RpcError: Socket closed", None)
    assert cause_line(unavailable).startswith("The actor None is unavailable: RpcError: Socket closed")

    class Raised(ray.exceptions.RayTaskError):
        def __init__(self):
            self.cause = FileNotFoundError(2, "No such file or directory", "/models/x")

        def __str__(self):
            return "ray::SlotWorker.facts() (pid=1, ip=10.0.0.2)\n  File ...\nFileNotFoundError: ..."
    assert cause_line(Raised()) == "FileNotFoundError: [Errno 2] No such file or directory: '/models/x'"
