"""A `vllm bench serve` command line mapped to the [load] and [decision] keys, each flag with vLLM 0.32's meaning
(vllm/benchmarks/serve.py, vllm/benchmarks/datasets/datasets.py). Pure: text in, a `BenchCommand` out, or one
`CommandError` line naming the flag the runner cannot honour (never dropped in silence). Flags that only shape
vllm bench's own output (--save-result, --result-dir, ...) or reach its own server (--host, --port) have no bearing
on the runner's load: they are named in one note.

- The workload: `random` lengths (--random-input-len / --random-output-len, or --input-len / --output-len; vLLM
  ignores EOS for random, so the length is exact); a request set read by the runner's readers: `custom` JSONL,
  `spec_bench`, `speed_bench` (DIR/SUBSET.jsonl) and `hf` with --hf-name philschmid/mt-bench (a local file; the
  runner downloads nothing). Their prompts go through the server's chat template (load.endpoint = "chat"), as vLLM
  applies it before sending, unless --skip-chat-template (custom: the prompt as written). Their output length is
  vLLM's: exactly N with --ignore-eos; ending at the end of sequence with a cap of N where the runner's cap for a
  request without its own length is N too (256), or each line's own (--custom-output-len -1).
- The arrivals: --request-rate R (a number, or several: one rate stage each, `2,4,8` or `2 4 8`) for
  --num-prompts / R seconds, so a stage holds the prompts vllm bench would send; --burstiness; --max-concurrency
  caps the requests in flight (load.max_in_flight) beside a rate, and with --request-rate inf (its default) it is a
  stage of that many users (closed loop), which runs for a time, not a count.
- --goodput METRIC:MS ... : vLLM counts a request good where it meets every limit (ttft, tpot, e2el), goodput
  those per second: decision.objective = "goodput", each limit an SLO at the highest percentile vllm bench reports
  (--metric-percentiles, 99 by default).
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field

from ..load import LoadConfig
from ...workload.request_set import DEFAULT_MAX_TOKENS
from .entries import CommandError, Mapped, split_command

FLAG = "--bench-cmd"
# vLLM 0.32's defaults (vllm/benchmarks/datasets/datasets.py, serve.py, the MTBench loader)
VLLM_NUM_PROMPTS = 1000
VLLM_RANDOM_INPUT_LEN, VLLM_RANDOM_OUTPUT_LEN = 1024, 128
VLLM_SET_OUTPUT_LEN = {"custom": 256, "spec_bench": 256, "speed_bench": 4096, "hf": 256}
SET_OUTPUT_FLAG = {"custom": "--custom-output-len", "spec_bench": "--spec-bench-output-len",
                   "speed_bench": "--speed-bench-output-len", "hf": "--hf-output-len"}
VLLM_METRIC_PERCENTILES = "99"
GOODPUT_METRICS = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e"}   # vllm bench's name -> the SLO key's
HF_SETS = ("philschmid/mt-bench",)     # the hf datasets whose rows the readers take (their "turns")
CHAT_BACKENDS, COMPLETION_BACKENDS = ("openai-chat",), ("openai", "vllm")
# the length of a users stage when nothing says it: the load's own default stage's
USERS_STAGE_S = LoadConfig.model_fields["stages"].default_factory()[0].duration_s

NO_BEARING = ("--label", "--save-result", "--save-detailed", "--append-result", "--metadata", "--result-dir",
              "--result-filename", "--disable-tqdm", "--percentile-metrics", "--plot-timeline",
              "--timeline-itl-thresholds", "--plot-dataset-stats", "--request-id-prefix", "--host", "--port",
              "--base-url", "--tokenizer", "--tokenizer-mode", "--trust-remote-code", "--ready-check-timeout-sec",
              "--insecure", "--num-warmups", "--no-stream", "--disable-shuffle")
REFUSED = {
    **dict.fromkeys(("--top-k", "--min-p", "--frequency-penalty", "--presence-penalty", "--repetition-penalty",
                     "--logprobs", "--use-beam-search", "--extra-body"),
                    "the runner's requests carry temperature and top_p only"),
    **dict.fromkeys(("--lora-modules", "--lora-assignment"), "the runner sends every request to the served model"),
    "--header": "the runner sends its own headers (the API key from the serve command)",
    "--profile": "the runner does not drive vLLM's profiler",
    **dict.fromkeys(("--ramp-up-strategy", "--ramp-up-start-rps", "--ramp-up-end-rps"),
                    "the runner's rate stages hold one rate each: give the rates to --request-rate 2,4,8"),
    "--probe-request-rate": "the runner sends no probe requests beside the load",
    "--self-timed": "the runner replays no timed trace",
    "--skip-tokenizer-init": "the runner counts tokens as the server reports them",
    "--no-oversample": "the runner walks a request set again from its start once it is through",
    "--enable-multimodal-chat": "the runner sends text",
    **dict.fromkeys(("--spec-bench-category", "--speed-bench-category"),
                    "the runner sends every category of the set (the report shows each one's own figures)"),
    **dict.fromkeys(("--hf-subset", "--hf-split"), "the runner reads the local file as it is"),
    **dict.fromkeys(("--random-batch-size", "--no-reranker", "--custom-ensure-client-side-data",
                     "--random-mm-base-items-per-request", "--random-mm-num-mm-items-range-ratio",
                     "--random-mm-limit-mm-per-prompt", "--random-mm-bucket-config", "--bfcl-categories",
                     "--blazedit-min-distance", "--blazedit-max-distance", "--asr-max-audio-len-sec",
                     "--asr-min-audio-len-sec", "--prefix-repetition-prefix-len", "--prefix-repetition-suffix-len",
                     "--prefix-repetition-num-prefixes", "--prefix-repetition-output-len",
                     "--timed-trace-chunk-hash-size", "--timed-trace-sec-multiplier", "--timed-trace-label-timestamp",
                     "--timed-trace-label-input-length", "--timed-trace-label-output-length",
                     "--timed-trace-label-hash-ids"), "its dataset is not one the runner reads"),
}
VALUE_FLAGS = ("--dataset-name", "--dataset-path", "--random-input-len", "--random-output-len", "--random-range-ratio",
               "--random-prefix-len", "--input-len", "--output-len", "--custom-output-len", "--spec-bench-output-len",
               "--sharegpt-output-len", "--speed-bench-output-len", "--speed-bench-dataset-subset", "--hf-name",
               "--hf-output-len", "--chat-template-kwargs", "--backend", "--endpoint", "--burstiness",
               "--max-concurrency", "--metric-percentiles", "--num-prompts", "--temperature", "--top-p", "--seed",
               "--model", "--served-model-name")
SWITCHES = ("--ignore-eos", "--skip-chat-template")
# the flags vllm bench reads with one dataset only (datasets.py get_samples; serve.py maps --input-len to random's and
# --output-len to every set's length but SPEED-Bench's): with another dataset each is named as doing nothing
DATASET_FLAGS = {
    "random": ("--random-input-len", "--random-output-len", "--random-range-ratio", "--random-prefix-len",
               "--input-len", "--output-len", "--dataset-path", "--ignore-eos"),
    "custom": ("--dataset-path", "--custom-output-len", "--output-len", "--skip-chat-template", "--ignore-eos"),
    "spec_bench": ("--dataset-path", "--spec-bench-output-len", "--output-len", "--skip-chat-template",
                   "--ignore-eos"),
    "speed_bench": ("--dataset-path", "--speed-bench-output-len", "--speed-bench-dataset-subset",
                    "--skip-chat-template", "--ignore-eos"),
    "hf": ("--dataset-path", "--hf-name", "--hf-output-len", "--output-len", "--skip-chat-template", "--ignore-eos"),
}
LISTS = ("--request-rate", "--goodput")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        if message.startswith("unrecognized arguments: "):   # the flags alone: a value after one may be a key
            flags = [part.split("=", 1)[0] for part in message.split()[2:] if part.startswith("-")]
            message = f"unrecognized arguments: {' '.join(flags) or 'a value with no flag before it'}"
        raise CommandError(f"{FLAG}: {message} (not a flag of vllm bench serve 0.32 the runner knows; write it as "
                           "`vllm bench serve --help` lists it)")


def _parser() -> _Parser:
    parser = _Parser(prog="vllm bench serve", add_help=False, allow_abbrev=False, argument_default=argparse.SUPPRESS)
    for flag in VALUE_FLAGS:
        parser.add_argument(flag)
    for flag in SWITCHES:
        parser.add_argument(flag, action="store_true")
    for flag in LISTS:
        parser.add_argument(flag, nargs="+")
    for flag in (*NO_BEARING, *REFUSED):
        parser.add_argument(flag, nargs="*")
    return parser


@dataclass(frozen=True)
class BenchCommand:
    """A parsed `vllm bench serve` command line: what it sets, each with the flags it came from."""

    entries: tuple[Mapped, ...]
    model: str | None = None                 # --model / --served-model-name: the name the requests carry
    not_used: tuple[str, ...] = ()           # flags with no bearing on the runner's load
    notes: tuple[str, ...] = field(default=())

    def note_lines(self) -> list[str]:
        lines = list(self.notes)
        if self.not_used:
            lines.append(f"{FLAG}: no bearing on the runner's load (vllm bench's own output or server): "
                         f"{', '.join(self.not_used)}")
        return lines


def parse_bench_cmd(text: str) -> BenchCommand:
    """The bench command line -> BenchCommand, or CommandError naming the first flag the runner cannot honour."""
    argv = split_command(text, FLAG)
    at = next((i for i in range(1, len(argv)) if argv[i - 1:i + 1] == ["bench", "serve"]), None)
    if at is None:
        raise CommandError(f"{FLAG}: write it as you run it, e.g. \"vllm bench serve --dataset-name random ...\" "
                           "(no `bench serve` in it)")
    args = [_normal(arg) for arg in argv[at + 1:]]
    given = vars(_parser().parse_args(args))
    flags = {name: f"--{name.replace('_', '-')}" for name in given}
    for name, flag in flags.items():
        if flag in REFUSED:
            raise CommandError(f"{FLAG}: {flag}: the runner cannot honour it ({REFUSED[flag]}); remove it")
    before = [part.split("=", 1)[0] for part in argv[:at - 1] if "=" in part]   # the bench client's own environment
    not_used = tuple(f"{name}=..." for name in before) + tuple(flag for flag in flags.values() if flag in NO_BEARING)
    given = {flags[name]: value for name, value in given.items() if flags[name] not in NO_BEARING}
    entries, notes = _workload(given)
    entries += _arrivals(given)
    entries += _goodput(given)
    notes += _doing_nothing(given)
    model = given.get("--served-model-name") or given.get("--model")
    return BenchCommand(tuple(entries), model, not_used, tuple(notes))


def _doing_nothing(given: dict) -> list[str]:
    """The given flags vllm bench reads with another dataset only, or for its report only (the percentiles without
    --goodput), as a note."""
    dataset = given.get("--dataset-name", "random")
    own = DATASET_FLAGS.get(dataset, ())
    other = [flag for flag in given if flag not in own and any(flag in flags for flags in DATASET_FLAGS.values())]
    notes = [f"{FLAG}: no effect with --dataset-name {dataset} (vllm bench reads them with another dataset only): "
             f"{', '.join(other)}"] if other else []
    if "--metric-percentiles" in given and "--goodput" not in given:
        notes.append(f"{FLAG}: --metric-percentiles: which percentiles vllm bench prints; with no --goodput it sets "
                     "no SLO here (the report shows the runner's own)")
    return notes


def _normal(arg: str) -> str:
    """vLLM's parser takes `_` for `-` in a flag's name."""
    if not arg.startswith("--"):
        return arg
    name, eq, value = arg.partition("=")
    return name.replace("_", "-") + eq + value


def _number(given: dict, flag: str, default, kind=int):
    if flag not in given:
        return default
    try:
        return kind(given[flag])
    except ValueError:
        raise CommandError(f"{FLAG}: {flag} {given[flag]}: give a {'whole ' if kind is int else ''}number") from None


def _workload(given: dict) -> tuple[list[Mapped], list[str]]:
    dataset = given.get("--dataset-name", "random")
    backend = given.get("--backend", "openai")
    if backend not in CHAT_BACKENDS + COMPLETION_BACKENDS:
        raise CommandError(f"{FLAG}: --backend {backend}: the runner sends completions (openai, vllm) or chat "
                           "(openai-chat) requests")
    chat_backend = backend in CHAT_BACKENDS
    endpoint = given.get("--endpoint")
    if endpoint is not None and endpoint.rstrip("/").endswith("chat/completions") != chat_backend:
        raise CommandError(f"{FLAG}: --endpoint {endpoint} with --backend {backend}: the runner posts to "
                           f"{'/v1/chat/completions' if chat_backend else '/v1/completions'}; remove --endpoint")
    entries = []
    if dataset == "random":
        entries, chat = _random(given), chat_backend
    elif dataset in VLLM_SET_OUTPUT_LEN:
        entries, templated = _request_set(dataset, given)
        chat = templated or chat_backend
    elif dataset == "sharegpt":
        raise CommandError(f"{FLAG}: --dataset-name sharegpt: vllm bench sends each conversation's first turn alone, "
                           "as a raw prompt, capped at its reference answer's length; the runner reads a ShareGPT file "
                           "as whole conversations up to their last human turn: write the first turns as a custom "
                           "JSONL ({\"prompt\": ..., \"output_tokens\": N}) and use --dataset-name custom")
    else:
        raise CommandError(f"{FLAG}: --dataset-name {dataset}: the runner reads random lengths, custom, spec_bench, "
                           "speed_bench and hf (philschmid/mt-bench) sets")
    entries.append(Mapped("load.endpoint", "chat" if chat else "completions",
                          "--backend openai-chat" if chat_backend else
                          "the set's prompts through the chat template, as vllm bench applies it" if chat else
                          f"--backend {backend} (/v1/completions)"))
    if "--chat-template-kwargs" in given:
        try:
            kwargs = json.loads(given["--chat-template-kwargs"])
        except ValueError:
            raise CommandError(f"{FLAG}: --chat-template-kwargs {given['--chat-template-kwargs']}: give a JSON "
                               "object") from None
        entries.append(Mapped("load.chat_template_kwargs", kwargs, "--chat-template-kwargs (sent with every chat "
                                                                    "request)"))
    notes = []
    if "--temperature" in given:
        entries.append(Mapped("load.temperature", _number(given, "--temperature", 0.0, float),
                              f"--temperature {given['--temperature']}"))
    else:
        entries.append(Mapped("load.temperature", 0.0, "no --temperature: vllm bench leaves it to the server's "
                                                        "default; the runner sends 0 (greedy)"))
        notes.append(f"{FLAG}: no --temperature: vllm bench leaves it to the server's default, the runner sends "
                     "temperature 0 (greedy); give --temperature T to choose")
    if "--top-p" in given:
        entries.append(Mapped("load.top_p", _number(given, "--top-p", 1.0, float), f"--top-p {given['--top-p']}"))
    if "--seed" in given:
        entries.append(Mapped("load.arrival_seed", _number(given, "--seed", 0), f"--seed {given['--seed']}: the "
                                                                                "arrival times and synthetic prompts"))
    return entries, notes


def _random(given: dict) -> list[Mapped]:
    if "--dataset-path" in given:
        raise CommandError(f"{FLAG}: --dataset-path with --dataset-name random (vLLM refuses it too): give "
                           "--dataset-name custom for a JSONL file")
    ratio = given.get("--random-range-ratio", "0")
    try:
        ratios = json.loads(ratio)
    except ValueError:
        ratios = None
    values = list(ratios.values()) if isinstance(ratios, dict) else [ratios]
    if not all(isinstance(v, (int, float)) and v == 0 for v in values):
        raise CommandError(f"{FLAG}: --random-range-ratio {ratio}: the runner's lengths are fixed; remove it (or 0), "
                           "or give the spread as workload variants (load.prompt_tokens = [...])")
    if _number(given, "--random-prefix-len", 0):
        raise CommandError(f"{FLAG}: --random-prefix-len {given['--random-prefix-len']}: the runner's prompts share "
                           "no fixed prefix; remove it")
    inputs = _number(given, "--input-len", _number(given, "--random-input-len", VLLM_RANDOM_INPUT_LEN))
    outputs = _number(given, "--output-len", _number(given, "--random-output-len", VLLM_RANDOM_OUTPUT_LEN))
    where_in = next((f"{f} {inputs}" for f in ("--input-len", "--random-input-len") if f in given),
                    f"--random-input-len {inputs} (vllm bench's default)")
    where_out = next((f"{f} {outputs}" for f in ("--output-len", "--random-output-len") if f in given),
                     f"--random-output-len {outputs} (vllm bench's default)")
    return [Mapped("load.prompt_tokens", inputs, f"{where_in}: the runner's synthetic prompts at that length"),
            Mapped("load.output_tokens", outputs, f"{where_out}: exactly, as vllm bench ignores EOS for random")]


def _request_set(dataset: str, given: dict) -> tuple[list[Mapped], bool]:
    path = given.get("--dataset-path")
    if not path:
        raise CommandError(f"{FLAG}: --dataset-name {dataset} needs --dataset-path FILE (vLLM's too)")
    origin = "--dataset-path"
    if dataset == "hf":
        name = given.get("--hf-name")
        if name not in HF_SETS:
            hub = name or path
            raise CommandError(f"{FLAG}: --dataset-name hf {hub}: the runner reads a local file and downloads nothing; "
                               f"its readers take {', '.join(HF_SETS)} (save its rows as JSONL, give --dataset-path "
                               f"FILE --hf-name {HF_SETS[0]}), or use --dataset-name custom")
        origin = f"--dataset-path (--hf-name {name}: each row's first turn)"
    if dataset == "speed_bench":
        subset = given.get("--speed-bench-dataset-subset", "qualitative")
        path = os.path.join(path, f"{subset}.jsonl")
        origin = f"--dataset-path DIR and its {subset}.jsonl, as vllm bench reads SPEED-Bench"
    skip = "--skip-chat-template" in given
    if skip and dataset != "custom":
        raise CommandError(f"{FLAG}: --skip-chat-template with {dataset}: the runner sends its turns as chat messages; "
                           "remove it")
    flag = "--output-len" if "--output-len" in given and dataset != "speed_bench" else SET_OUTPUT_FLAG[dataset]
    n = _number(given, flag, VLLM_SET_OUTPUT_LEN[dataset])
    said = f"{flag} {n}" + ("" if flag in given else " (vllm bench's default)")
    ignore_eos = "--ignore-eos" in given
    if dataset == "custom" and n == -1 and ignore_eos:
        raise CommandError(f"{FLAG}: --ignore-eos with {said}: the runner sends each line's own length ending at its "
                           "end of sequence; remove --ignore-eos, or give --custom-output-len N for exactly N")
    if dataset == "custom" and n == -1:
        output, why = "natural", f"{said}: each line's output_tokens, ending at its end of sequence"
    elif ignore_eos and n > 0:
        output, why = n, f"{said} with --ignore-eos: exactly {n} tokens"
    elif n == DEFAULT_MAX_TOKENS and dataset != "custom":
        output, why = "natural", f"{said}: each request ends at its end of sequence, capped at {n}"
    else:
        own = " (--custom-output-len -1: each line's output_tokens)" if dataset == "custom" else ""
        raise CommandError(f"{FLAG}: {said}: vllm bench caps every request at {n} tokens, ending at its end of "
                           f"sequence; the runner sends a set's requests capped at their own length "
                           f"({DEFAULT_MAX_TOKENS} without one){own} or exactly N: add --ignore-eos for exactly {n}")
    return [Mapped("load.requests", path, origin), Mapped("load.output_tokens", output, why)], not skip


def _rates(given: dict) -> list[float]:
    texts = [part for value in given.get("--request-rate", ["inf"]) for part in value.split(",") if part]
    try:
        rates = [float(text) for text in texts]
    except ValueError:
        raise CommandError(f"{FLAG}: --request-rate {' '.join(texts)}: give requests per second, e.g. "
                           "--request-rate 8 (or several: 2,4,8)") from None
    if not rates or not all(rate > 0 for rate in rates):
        raise CommandError(f"{FLAG}: --request-rate {' '.join(texts)}: give requests per second above 0")
    return rates


def _arrivals(given: dict) -> list[Mapped]:
    rates = _rates(given)
    prompts = _number(given, "--num-prompts", VLLM_NUM_PROMPTS)
    cap = _number(given, "--max-concurrency", None)
    if prompts < 1 or (cap is not None and cap < 1):
        flag = "--num-prompts" if prompts < 1 else "--max-concurrency"
        raise CommandError(f"{FLAG}: {flag} {given[flag]}: give 1 or more")
    said = f"--num-prompts {prompts}" + ("" if "--num-prompts" in given else " (vllm bench's default)")
    stages, origins = [], []
    for rate in rates:
        if rate == float("inf"):
            if cap is None:
                raise CommandError(f"{FLAG}: --request-rate inf without --max-concurrency sends every prompt at once; "
                                   "the runner's stages are a rate or a number of users: give --request-rate R or "
                                   "--max-concurrency N")
            if "--num-prompts" in given:
                raise CommandError(f"{FLAG}: --num-prompts {prompts} with --max-concurrency {cap} and no rate: a stage "
                                   f"of {cap} users runs for a time, not a count; remove --num-prompts (the stage runs "
                                   f"{USERS_STAGE_S:g} s; set its length with --set 'load.stages=[...]')")
            stages.append({"users": cap, "duration_s": USERS_STAGE_S})
            origins.append(f"--max-concurrency {cap} at --request-rate inf: {cap} users (closed loop) for "
                           f"{USERS_STAGE_S:g} s, the load's default stage length")
        else:
            stages.append({"rate": rate, "duration_s": prompts / rate})
            origins.append(f"--request-rate {rate:g} for {said} / {rate:g} = {prompts / rate:g} s")
    entries = [Mapped("load.stages", stages, "; ".join(origins))]
    if "--burstiness" in given:
        entries.append(Mapped("load.burstiness", _number(given, "--burstiness", 1.0, float),
                              f"--burstiness {given['--burstiness']}: the gamma shape of the arrivals' gaps "
                              "(1 = Poisson)"))
    if cap is not None and any(rate != float("inf") for rate in rates):
        entries.append(Mapped("load.max_in_flight", cap, f"--max-concurrency {cap}: the requests in flight at a rate"))
    return entries


def _goodput(given: dict) -> list[Mapped]:
    if "--goodput" not in given:
        return []
    text = given.get("--metric-percentiles", VLLM_METRIC_PERCENTILES)
    try:
        percentiles = [float(p) for p in text.split(",")]
    except ValueError:
        percentiles = [float("nan")]
    percentile = max(percentiles)
    if not (all(0 <= p <= 100 for p in percentiles) and 0 < percentile < 100):   # numpy's range; the SLO's below 100
        raise CommandError(f"{FLAG}: --metric-percentiles {text}: the SLOs hold at a percentile between 0 and 100, "
                           "e.g. 99")
    slo: dict[str, float] = {}
    for pair in given["--goodput"]:
        name, _, value = pair.partition(":")
        if name not in GOODPUT_METRICS:
            raise CommandError(f"{FLAG}: --goodput {pair}: give METRIC:MS with METRIC one of "
                               f"{', '.join(GOODPUT_METRICS)}, e.g. ttft:500 tpot:50 (vllm bench's names)")
        try:
            limit = float(value)
        except ValueError:
            limit = float("nan")
        if not 0 < limit < float("inf"):
            raise CommandError(f"{FLAG}: --goodput {pair}: give the limit in milliseconds above 0, e.g. {name}:500")
        slo[f"{GOODPUT_METRICS[name]}_p{percentile:g}_ms"] = int(limit) if limit.is_integer() else limit
    where = f"--metric-percentiles {text}" if "--metric-percentiles" in given else "vllm bench's default p99"
    return [Mapped("decision.slo", slo, f"--goodput {' '.join(given['--goodput'])}: each limit at the highest "
                                        f"percentile reported ({where})"),
            Mapped("decision.objective", "goodput", "--goodput: requests per second meeting every limit, as vllm "
                                                    "bench counts them")]
