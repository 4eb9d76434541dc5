"""vLLM's CPU build and its threads: the variable that binds each worker's OpenMP threads to CPUs, its
value's format, and how many workers a server runs (tensor x pipeline parallel)."""
from __future__ import annotations

from collections.abc import Sequence

from ..contracts.cpus import format_cpus, parse_cpus

OMP_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
NOT_A_CPU_LIST = ("", "auto", "nobind", "all")
TENSOR_PARALLEL_FLAGS = ("--tensor-parallel-size", "-tp")
PIPELINE_PARALLEL_FLAGS = ("--pipeline-parallel-size", "-pp")


def omp_bind_cpus(value: str) -> tuple[int, ...] | None:
    """The CPUs a VLLM_CPU_OMP_THREADS_BIND value binds ("0-3", "0-3|4-7" per rank); None for
    "auto", "nobind" or empty (not a CPU list)."""
    value = value.strip()
    if value in NOT_A_CPU_LIST:
        return None
    cpus: set[int] = set()
    for rank in value.split("|"):
        cpus.update(parse_cpus(rank))
    return tuple(sorted(cpus))


def omp_bind_lists(cpus: tuple[int, ...], ranks: int) -> str:
    """The value for `ranks` workers sharing `cpus` (at least one each): contiguous, equal lists joined by "|"."""
    share = len(cpus) // ranks
    return "|".join(format_cpus(cpus[rank * share:(rank + 1) * share]) for rank in range(ranks))


def worker_ranks(extra_args: Sequence[str]) -> int:
    """vLLM workers on this host (tensor x pipeline parallel): the OpenMP binding needs one CPU list each."""
    args = list(extra_args)

    def size(flags: tuple[str, ...]) -> int:
        found = 1
        for index, arg in enumerate(args):
            name, eq, value = arg.partition("=")
            if name in flags:
                value = value if eq else (args[index + 1] if index + 1 < len(args) else "1")
                found = max(found, int(value) if value.isdigit() and int(value) > 0 else 1)
        return found

    return size(TENSOR_PARALLEL_FLAGS) * size(PIPELINE_PARALLEL_FLAGS)
