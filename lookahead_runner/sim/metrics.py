"""The simulator's /metrics: vLLM V1 metric names and labels, rendered by prometheus_client.

Counters and gauges are read from the engine model at scrape time (one source of truth);
latency histograms are prometheus_client Histograms the HTTP layer observes. The registry is
private, so several servers can live in one test process.
"""
from __future__ import annotations

import time
from typing import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.profiles import Profile

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LABELS = ("engine", "model_name")

_TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                   10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_ITL_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                  20.0, 40.0, 80.0)
_REQUEST_BUCKETS_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                      120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


class _EngineCollector(Collector):
    """Engine counters and gauges, in the order vLLM 0.32 exposes them."""

    def __init__(self, model: EngineModel, model_name: str, profile: Profile) -> None:
        self.model = model
        self.labels = ["0", model_name]
        self.profile = profile
        self.created_s = time.time()

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=LABELS)
        family.add_metric(self.labels, value, created=self.created_s)
        return family

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=LABELS)
        family.add_metric(self.labels, value)
        return family

    def collect(self) -> Iterator[Metric]:
        m, c = self.model, self.model.counters
        if m.k > 0:
            yield self._counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", c.spec_drafts)
            yield self._counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", c.spec_draft_tokens)
            yield self._counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                c.spec_accepted_tokens)
            per_pos = CounterMetricFamily("vllm:spec_decode_num_accepted_tokens_per_pos",
                                          "Accepted tokens per draft position.", labels=(*LABELS, "position"))
            for position, value in enumerate(c.accepted_per_pos()):
                per_pos.add_metric([*self.labels, str(position)], value, created=self.created_s)
            yield per_pos
        yield self._gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                          m.num_running)
        yield self._gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                          m.num_waiting)
        yield self._gauge(self.profile.kv_usage_metric, "KV-cache usage. 1 means 100 percent usage.", m.kv_usage)
        yield self._counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                            c.preemptions)
        yield self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens)
        yield self._counter("vllm:generation_tokens", "Number of generation tokens processed.",
                            c.generation_tokens)
        success = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                                      labels=(*LABELS, "finished_reason"))
        for reason in ("stop", "length", "abort"):
            success.add_metric([*self.labels, reason], c.finished[reason], created=self.created_s)
        yield success


class _CacheConfigCollector(Collector):
    def __init__(self, model: EngineModel) -> None:
        self.model = model

    def collect(self) -> Iterator[Metric]:
        cfg, sizing = self.model.cfg, self.model.sizing
        info = {
            "block_size": str(cfg.block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": "False",
            "engine": "0",
            "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
            "kv_cache_max_concurrency": f"{sizing.num_blocks * cfg.block_size / cfg.max_model_len:.1f}",
            "kv_cache_size_tokens": str(sizing.num_blocks * cfg.block_size),
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(sizing.num_blocks),
        }
        family = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                                   labels=list(info))
        family.add_metric(list(info.values()), 1.0)
        yield family


class SimMetrics:
    """The registry plus the histograms the HTTP layer feeds."""

    def __init__(self, model: EngineModel, model_name: str, profile: Profile) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        ProcessCollector(registry=self.registry)
        self.registry.register(_EngineCollector(model, model_name, profile))

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, LABELS, buckets=buckets, registry=self.registry).labels("0", model_name)

        self.ttft_s = histogram("vllm:time_to_first_token_seconds",
                                "Histogram of time to first token in seconds.", _TTFT_BUCKETS_S)
        self.itl_s = histogram(profile.itl_metric, "Histogram of inter-token latency in seconds.", _ITL_BUCKETS_S)
        self.e2e_s = histogram("vllm:e2e_request_latency_seconds",
                               "Histogram of e2e request latency in seconds.", _REQUEST_BUCKETS_S)
        self.queue_s = histogram("vllm:request_queue_time_seconds",
                                 "Histogram of time spent in WAITING phase for request.", _REQUEST_BUCKETS_S)
        self.registry.register(_CacheConfigCollector(model))

    def render(self) -> bytes:
        return generate_latest(self.registry)
