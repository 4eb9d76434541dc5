"""A cluster's nodes compared before any life (run/cluster_nodes.py): the pure parts and the NVML facts."""
from types import SimpleNamespace

from lookahead_runner.config import config_from_dict
from lookahead_runner.run.cluster_nodes import NodeFacts, _gpus, differences, model_paths, unreadable

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
