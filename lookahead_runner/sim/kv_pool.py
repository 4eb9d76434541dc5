"""The simulated server's startup: the flags the engine model needs (vLLM's names) and the KV pool it gets,
profiled like vLLM (memory budget - weights - activation peak, in whole blocks), with V1's errors when the
pool is empty or too small for one request."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from lookahead_runner.sim.scenarios import Scenario


class EngineConfig(NamedTuple):
    """Server flags the model needs (vLLM names)."""

    max_num_seqs: int = 128
    max_num_batched_tokens: int = 2048
    block_size: int = 16
    gpu_memory_utilization: float = 0.92
    max_model_len: int = 4096
    num_speculative_tokens: int = 0          # K; 0 = no speculation
    method: str = ""                         # speculative method, "" without speculation
    lookahead_tokens: int = 0                # L: extra KV slots reserved per running sequence
    seed: int = 0
    num_gpu_blocks_override: int | None = None
    kv_cache_memory_bytes: int | None = None
    spec_disable_batch_size: int | None = None  # V0: no drafting in a step whose running batch is this large
    k_schedule: tuple[tuple[int, int, int], ...] | None = None  # [(lo, hi, K), ...] by batch size


@dataclass(frozen=True)
class PoolSizing:
    """Startup memory split (MiB) and the resulting KV pool."""

    total_mib: float
    weights_mib: float
    activation_peak_mib: float
    kv_mib: float
    block_mib: float
    num_blocks: int

    @property
    def used_mib(self) -> float:
        """What NVML shows once the server is up."""
        return self.weights_mib + self.activation_peak_mib + self.num_blocks * self.block_mib


class KVPoolError(ValueError):
    """The KV pool cannot be built; `kind` is "empty" or "too-small" (str(e) is V1's text)."""

    def __init__(self, message: str, kind: str, max_model_len: int = 0, capacity_tokens: int = 0) -> None:
        super().__init__(message)
        self.kind, self.max_model_len, self.capacity_tokens = kind, max_model_len, capacity_tokens


def size_kv_pool(scenario: Scenario, cfg: EngineConfig) -> PoolSizing:
    """Profile memory like vLLM: budget - weights - activation peak = KV pool, in whole blocks."""
    k = cfg.num_speculative_tokens
    draft = scenario.draft_cost(cfg.method) if k > 0 else None
    weights = scenario.target_weights_mib + (draft.weights_mib if draft else 0.0)
    kv_kib_per_token = scenario.kv_kib_per_token + (draft.kv_kib_per_token if draft else 0.0)
    activation = scenario.activation_base_mib + scenario.activation_mib_per_token * cfg.max_num_seqs * (k + 1)
    block_mib = cfg.block_size * kv_kib_per_token / 1024.0
    if cfg.kv_cache_memory_bytes is not None:
        kv_mib = cfg.kv_cache_memory_bytes / 2**20
    else:
        kv_mib = scenario.gpu_total_mib * cfg.gpu_memory_utilization - weights - activation
    num_blocks = int(kv_mib // block_mib) if kv_mib > 0 else 0
    if cfg.num_gpu_blocks_override is not None:
        num_blocks = cfg.num_gpu_blocks_override
    if num_blocks <= 0:
        raise KVPoolError(
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine.", "empty"
        )
    capacity_tokens = num_blocks * cfg.block_size
    if capacity_tokens < cfg.max_model_len:
        need_gib = cfg.max_model_len * kv_kib_per_token / 2**20
        have_gib = num_blocks * block_mib / 1024.0
        raise KVPoolError(
            f"To serve at least one request with the models's max seq len ({cfg.max_model_len}), "
            f"({need_gib:.2f} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({have_gib:.2f} GiB). Based on the available memory, the estimated maximum model "
            f"length is {capacity_tokens}. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine.", "too-small", cfg.max_model_len, capacity_tokens
        )
    return PoolSizing(scenario.gpu_total_mib, weights, activation, max(kv_mib, 0.0), block_mib, num_blocks)
