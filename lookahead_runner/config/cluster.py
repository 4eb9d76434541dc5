"""The cluster section: where server lives run, here one at a time (local) or in parallel on a Ray cluster."""
from __future__ import annotations

import importlib.util
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .strict import ConfigError, Strict

RAY_INSTALL = "pip install 'lookahead-runner[ray]'"
# vLLM's parallel sizes: a life needs their product of GPUs (vLLM 0.32's ParallelConfig: a replica's world size is
# tensor x pipeline x prefill context parallel, and `vllm serve` runs data parallel replicas of it on this node:
# --data-parallel-size-local where given, else --data-parallel-size)
PARALLEL_FLAGS = {"--tensor-parallel-size": "tp", "-tp": "tp", "--pipeline-parallel-size": "pp", "-pp": "pp",
                  "--prefill-context-parallel-size": "pcp", "-pcp": "pcp", "--data-parallel-size": "dp", "-dp": "dp",
                  "--data-parallel-size-local": "dpl", "-dpl": "dpl"}


class ClusterConfig(Strict):
    """Where server lives run: one at a time on this machine (local), or in parallel on a Ray cluster (engine =
    "ray"), each life a Ray actor task holding its GPUs, its load on its node."""

    engine: Literal["local", "ray"] = Field("local", description="local: one life at a time on this machine; "
                                                                  "ray: lives in parallel on a Ray cluster")
    address: str = Field("", description="the Ray cluster: \"auto\" (the one this machine belongs to) or "
                                         "\"ray://HOST:10001\"; empty = start a Ray on this machine for the sweep")
    gpus: int | None = Field(None, ge=0, le=4096, description="a Ray started here: its GPU slots (default: the "
                                                               "GPUs NVML sees; the simulator needs none, so a demo "
                                                               "sets e.g. 2)")
    gpus_per_life: int | None = Field(None, ge=0, le=512, description="GPUs a server life holds (default: "
                                                                       "tensor x pipeline x data parallel "
                                                                       "of server.extra_args)")
    cpus_per_life: float = Field(1.0, gt=0, le=1024, description="Ray CPUs a server life holds (server and Locust)")

    @field_validator("address")
    @classmethod
    def _address(cls, address: str) -> str:
        if address and not _ray_address(address):
            raise ValueError(f"{address!r}: give \"auto\", \"ray://HOST:PORT\" or the head's HOST:PORT, or leave "
                             "it empty to start a Ray here")
        return address

    @model_validator(mode="after")
    def _ray_only(self) -> "ClusterConfig":
        if self.engine == "local":
            for name in ("address", "gpus", "gpus_per_life"):
                if getattr(self, name) not in ("", None):
                    raise ValueError(f"{name} is for engine = \"ray\"; set cluster.engine = \"ray\" or remove it")
        if self.address and self.gpus is not None:
            raise ValueError("gpus sets the GPU slots of a Ray started here; a cluster at cluster.address counts "
                             "its own: remove cluster.gpus or the address")
        return self

    def life_gpus(self, extra_args: list[str]) -> int:
        """GPUs one life asks Ray for: gpus_per_life, or the parallel sizes of the server's args (parallel_gpus)."""
        return self.gpus_per_life if self.gpus_per_life is not None else parallel_gpus(extra_args)


def _ray_address(address: str) -> bool:
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    return address == "auto" or bool(colon and host and port.isdigit())


def parallel_gpus(extra_args: list[str]) -> int:
    """The GPUs `vllm serve` takes on this node: tensor x pipeline x prefill context parallel, times its data
    parallel replicas here, as vLLM reads the flags ("--flag N", "--flag=N", underscores for dashes)."""
    sizes = {"tp": 1, "pp": 1, "pcp": 1, "dp": 1}
    for index, arg in enumerate(extra_args):
        flag, eq, value = arg.partition("=")
        flag = flag.replace("_", "-") if flag.startswith("--") else flag
        if flag not in PARALLEL_FLAGS:
            continue
        value = value if eq else (extra_args[index + 1] if index + 1 < len(extra_args) else "")
        if value.isdigit() and int(value) > 0:
            sizes[PARALLEL_FLAGS[flag]] = int(value)
    return sizes["tp"] * sizes["pp"] * sizes["pcp"] * sizes.get("dpl", sizes["dp"])


LOOPBACK = ("127.0.0.1", "localhost", "::1")
GPUS_ENV = "CUDA_VISIBLE_DEVICES"  # how Ray hands a slot its GPUs (telemetry/visible_gpus.py reads it)


def cluster_problem(server, load) -> str:
    """What the server and load sections ask that slots sharing a node cannot give (one line with the fix), or ""."""
    if server.memory_source == "dcgm" or (server.memory_source == "auto" and server.dcgm_url):
        return ("server.memory_source: DCGM sums every GPU of a host, so the other slots' servers would count in "
                "each life's memory, its stop rule and its stable wait; with cluster.engine = \"ray\" use \"nvml\" "
                "(each slot reads its own GPUs) or \"auto\" without server.dcgm_url")
    if server.port:
        return (f"server.port = {server.port}: slots on one node would all start their server on it; set "
                "server.port = 0 (each life picks a free port on its node)")
    if server.host not in LOOPBACK:
        return (f"server.host = {server.host!r}: on a Ray slot the server and Locust share their node and the load "
                "goes only to 127.0.0.1; set server.host = \"127.0.0.1\"")
    if GPUS_ENV in server.env:
        return (f"server.env.{GPUS_ENV} = {server.env[GPUS_ENV]!r}: Ray gives each slot its GPUs through it, and this "
                "value would put every slot's server on the same GPUs (and sample their memory there); remove it "
                "(cluster.gpus_per_life sets how many a life holds)")
    for name, cpus in (("server.cpus", server.cpus), ("load.cpus", load.cpus)):
        if cpus:
            return (f"{name} = {cpus!r}: CPU lists are this machine's, and nothing is pinned on a Ray slot (a life "
                    "holds cluster.cpus_per_life CPUs of its node); remove it")
    return ""


def check_ray_installed(cluster: ClusterConfig, source: str = "config", find=importlib.util.find_spec) -> None:
    """engine = "ray" without Ray: one line with the install, before anything starts."""
    if cluster.engine == "ray" and find("ray") is None:
        raise ConfigError(f"{source}: cluster.engine = \"ray\" needs Ray on this machine: {RAY_INSTALL} "
                          "(or set cluster.engine = \"local\")")
