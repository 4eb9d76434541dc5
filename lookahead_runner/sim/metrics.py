"""The simulator's /metrics, in the names and labels of the emulated generation (docs/vllm-facts.md).

V1 (0.10, 0.32): labels engine, model_name; `vllm:kv_cache_usage_perc`; spec decoding as counters
(drafts, draft tokens, accepted, accepted per position). 0.32 exposes exactly the families of
tests/fixtures/vllm-0.32.0-cpu/metrics-*.txt (the ones the simulator has no physics for stay 0).
V0 (0.6): label model_name; `vllm:gpu_cache_usage_perc`, `vllm:num_requests_swapped`; spec decoding as
gauges (draft_acceptance_rate, efficiency) plus counters (accepted, draft, emitted tokens), no drafts
counter. Spec decoding series are absent without speculation, in both.
Counters and gauges are read from the engine model at scrape time (one source of truth); histograms
are prometheus_client Histograms the HTTP layer feeds. The registry is private per server.
"""
from __future__ import annotations

import time
from typing import Iterator, NamedTuple

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from lookahead_runner.sim.model import EngineModel
from lookahead_runner.sim.profiles import Profile

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_TTFT_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
           40.0, 80.0, 160.0, 640.0, 2560.0)
_ITL_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_REQUEST_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
              480.0, 960.0, 1920.0, 7680.0)
_ITERATION_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_PARAMS_N = (1, 2, 5, 10, 20)
_PREEMPTIONS = (1, 2, 3, 4, 5, 10, 20)
_V1_ONLY_0_32 = ("vllm:request_time_per_output_token_seconds", "vllm:request_num_preemptions",
                 "vllm:request_prefill_kv_computed_tokens")


def _tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's build_1_2_5_buckets(max_model_len)."""
    out, exponent = [], 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return tuple(out)
            out.append(value)
        exponent += 1


class RequestDone(NamedTuple):
    """One finished request, as the HTTP layer saw it (seconds)."""

    queue_s: float
    prefill_s: float            # first scheduled -> first token
    decode_s: float             # first token -> last token
    e2e_s: float
    prompt_tokens: int
    generation_tokens: int
    max_tokens: int
    preemptions: int


class _EngineCollector(Collector):
    """Counters and gauges, in the order the emulated version exposes them."""

    def __init__(self, model: EngineModel, model_name: str, profile: Profile) -> None:
        self.model, self.profile = model, profile
        self.v0 = profile.engine == "v0"
        self.full = profile.version == "0.32.0"
        self.label_names = ("model_name",) if self.v0 else ("engine", "model_name")
        self.labels = [model_name] if self.v0 else ["0", model_name]
        self.model_name = model_name
        self.created_s = time.time()

    def _family(self, kind: type, name: str, doc: str, values: dict[str, float] | float,
                extra: str | None = None, labels: tuple[str, ...] | None = None) -> Metric:
        names = (*(self.label_names if labels is None else labels), *((extra,) if extra else ()))
        family = kind(name, doc, labels=names)
        base = self.labels if labels is None else [self.model_name]
        items = values.items() if isinstance(values, dict) else [(None, values)]
        for key, value in items:
            row = [*base, key] if extra else base
            if kind is CounterMetricFamily:
                family.add_metric(row, value, created=self.created_s)
            else:
                family.add_metric(row, value)
        return family

    def _counter(self, name: str, doc: str, values, extra: str | None = None, labels=None) -> Metric:
        return self._family(CounterMetricFamily, name, doc, values, extra, labels)

    def _gauge(self, name: str, doc: str, values, extra: str | None = None) -> Metric:
        return self._family(GaugeMetricFamily, name, doc, values, extra)

    def collect(self) -> Iterator[Metric]:
        yield from (self._collect_v0() if self.v0 else self._collect_v1())

    def _collect_v1(self) -> Iterator[Metric]:
        m, c, full = self.model, self.model.counters, self.full
        if m.k > 0:
            yield self._counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", c.spec_drafts)
            yield self._counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", c.spec_draft_tokens)
            yield self._counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                c.spec_accepted_tokens)
            yield self._counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                                {str(i): v for i, v in enumerate(c.accepted_per_pos())}, "position")
        if full:
            for what in ("flops", "read_bytes", "write_bytes"):
                yield self._counter(f"vllm:estimated_{what}_per_gpu", f"Estimated number of {what} per GPU.", 0.0)
        yield self._gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                          m.num_running)
        yield self._gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", m.num_waiting)
        if full:
            yield self._gauge("vllm:num_requests_waiting_by_reason", "Number of waiting requests by reason.",
                              {"capacity": m.num_waiting, "deferred": 0}, "reason")
            yield self._gauge("vllm:engine_sleep_state", "Engine sleep state.",
                              {"awake": 1, "weights_offloaded": 0, "discard_all": 0}, "sleep_state")
        yield self._gauge(self.profile.kv_usage_metric, "KV-cache usage. 1 means 100 percent usage.", m.kv_usage)
        if full:
            yield self._counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried "
                                "tokens.", c.prompt_tokens)
            for name in ("prefix_cache_hits", "external_prefix_cache_queries", "external_prefix_cache_hits",
                         "mm_cache_queries", "mm_cache_hits"):
                yield self._counter(f"vllm:{name}", name.replace("_", " ").capitalize() + ".", 0.0)
        yield self._counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", c.preemptions)
        yield self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens)
        if full:
            yield self._counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
                                {"local_compute": c.prompt_tokens, "local_cache_hit": 0, "external_kv_transfer": 0},
                                "source")
            yield self._counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", 0)
            yield self._counter("vllm:prompt_tokens_cached_by_source", "Prefix-cache hit tokens by cache tier.",
                                dict.fromkeys(("device", "host", "p2p", "disk", "external_unspecified"), 0), "source")
        yield self._counter("vllm:generation_tokens", "Number of generation tokens processed.", c.generation_tokens)
        reasons = dict(c.finished, **({"error": 0, "repetition": 0} if full else {}))
        yield self._counter("vllm:request_success", "Count of successfully processed requests.", reasons,
                            "finished_reason")
        if full:
            yield self._counter("vllm:admission_rejections", "Number of admission attempts rejected by a queue "
                                "limit, by reason.", {"max_num_queued_reqs": 0, "max_num_queued_tokens": 0},
                                "reason", labels=("model_name",))

    def _collect_v0(self) -> Iterator[Metric]:
        m, c = self.model, self.model.counters
        yield self._gauge("vllm:num_requests_running", "Number of requests currently running on GPU.", m.num_running)
        yield self._gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", 0)
        yield self._gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", m.num_waiting)
        yield self._gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", m.kv_usage)
        yield self._gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", 0.0)
        yield self._counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", c.preemptions)
        yield self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens)
        yield self._counter("vllm:generation_tokens", "Number of generation tokens processed.", c.generation_tokens)
        yield self._counter("vllm:request_success", "Count of successfully processed requests.",
                            {k: v for k, v in c.finished.items() if k != "abort"}, "finished_reason")
        if m.k > 0 and c.spec_drafts:
            emitted = c.spec_accepted_tokens + c.spec_drafts
            yield self._gauge("vllm:spec_decode_draft_acceptance_rate", "Speulative token acceptance rate.",
                              c.spec_accepted_tokens / c.spec_draft_tokens)
            yield self._gauge("vllm:spec_decode_efficiency", "Speculative decoding system efficiency.",
                              emitted / (c.spec_drafts * (m.k + 1)))
            yield self._counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                c.spec_accepted_tokens)
            yield self._counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", c.spec_draft_tokens)
            yield self._counter("vllm:spec_decode_num_emitted_tokens", "Number of emitted tokens.", emitted)


class _CacheConfigCollector(Collector):
    def __init__(self, model: EngineModel, profile: Profile) -> None:
        self.model, self.profile = model, profile

    def collect(self) -> Iterator[Metric]:
        cfg, sizing = self.model.cfg, self.model.sizing
        tokens = sizing.num_blocks * cfg.block_size
        info = {"block_size": str(cfg.block_size), "cache_dtype": "auto", "enable_prefix_caching": "False"}
        if self.profile.engine == "v0":
            info.update(gpu_memory_utilization=str(cfg.gpu_memory_utilization), num_cpu_blocks="None",
                        num_gpu_blocks=str(sizing.num_blocks), swap_space_bytes=str(4 * 2**30))
        else:
            info.update(engine="0", gpu_memory_utilization=str(cfg.gpu_memory_utilization),
                        kv_cache_max_concurrency=f"{tokens / cfg.max_model_len:.1f}", kv_cache_size_tokens=str(tokens),
                        num_cpu_blocks="None", num_gpu_blocks=str(sizing.num_blocks))
        family = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                                   labels=list(info))
        family.add_metric(list(info.values()), 1.0)
        yield family


class _Without:
    """A registry's families less the dropped ones (--sim-fault drop-metric=NAME)."""

    def __init__(self, registry: CollectorRegistry, dropped: frozenset[str]) -> None:
        self.registry, self.dropped = registry, dropped

    def collect(self) -> Iterator[Metric]:
        # prometheus_client names a counter's family without _total; the fault names it either way
        return (family for family in self.registry.collect() if family.name.removesuffix("_total") not in self.dropped)


class SimMetrics:
    """The registry plus the histograms the HTTP layer feeds."""

    def __init__(self, model: EngineModel, model_name: str, profile: Profile,
                 dropped: frozenset[str] = frozenset()) -> None:
        self.dropped = dropped
        self.registry = CollectorRegistry(auto_describe=False)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        ProcessCollector(registry=self.registry)
        self.registry.register(_EngineCollector(model, model_name, profile))
        v0, full = profile.engine == "v0", profile.version == "0.32.0"
        labels, values = (("model_name",), (model_name,)) if v0 else (("engine", "model_name"), ("0", model_name))
        tokens = _tokens_buckets(model.cfg.max_model_len)

        def histogram(name: str, doc: str, buckets) -> Histogram | None:
            if name in _V1_ONLY_0_32 and not full:
                return None
            return Histogram(name, doc, labels, buckets=buckets, registry=self.registry).labels(*values)

        self.prompt_tokens = histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
        self.generation_tokens = histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
                                           tokens)
        self.iteration_tokens = histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per "
                                          "engine_step.", _ITERATION_TOKENS)
        self.max_generation = histogram("vllm:request_max_num_generation_tokens", "Histogram of maximum number of "
                                        "requested generation tokens.", tokens)
        self.params_n = histogram("vllm:request_params_n", "Histogram of the n request parameter.", _PARAMS_N)
        self.params_max_tokens = histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request "
                                           "parameter.", tokens)
        self.ttft_s = histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                                _TTFT_S)
        self.itl_s = histogram(profile.itl_metric, "Histogram of inter-token latency in seconds.", _ITL_S)
        self.tpot_s = histogram("vllm:request_time_per_output_token_seconds", "Histogram of "
                                "time_per_output_token_seconds per request.", _ITL_S)
        self.e2e_s = histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                               _REQUEST_S)
        self.queue_s = histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for "
                                 "request.", _REQUEST_S)
        self.inference_s = histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING "
                                     "phase for request.", _REQUEST_S)
        self.prefill_s = histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase "
                                   "for request.", _REQUEST_S)
        self.decode_s = histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for "
                                  "request.", _REQUEST_S)
        self.num_preemptions = histogram("vllm:request_num_preemptions", "Histogram of the number of times a "
                                         "request was preempted.", _PREEMPTIONS)
        self.prefill_kv = histogram("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens computed "
                                    "during prefill (excluding cached tokens).", tokens)
        self.registry.register(_CacheConfigCollector(model, profile))

    def request_done(self, r: RequestDone) -> None:
        self.e2e_s.observe(r.e2e_s)
        self.prefill_s.observe(r.prefill_s)
        self.decode_s.observe(r.decode_s)
        self.inference_s.observe(r.prefill_s + r.decode_s)
        self.prompt_tokens.observe(r.prompt_tokens)
        self.generation_tokens.observe(r.generation_tokens)
        self.max_generation.observe(r.max_tokens)
        self.params_n.observe(1)
        self.params_max_tokens.observe(r.max_tokens)
        if self.tpot_s is not None:
            self.tpot_s.observe(r.decode_s / (r.generation_tokens - 1) if r.generation_tokens > 1 else 0.0)
            self.num_preemptions.observe(r.preemptions)
            self.prefill_kv.observe(r.prompt_tokens)

    def render(self) -> bytes:
        return generate_latest(_Without(self.registry, self.dropped) if self.dropped else self.registry)
