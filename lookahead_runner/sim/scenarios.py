"""Named hardware + workload presets for the simulated vLLM server.

A scenario is the physics the engine model runs on: GPU memory, model sizes, the cost of one
step and how often the drafter is right. It never scripts an outcome; the phenomena the
tuning method looks for (speculation helps at low concurrency, KV lookahead shrinks the real
batch at high concurrency, low acceptance wastes work) follow from these numbers.

Defaults describe an 8B target (fp16, 15 GiB of weights, 128 KiB of KV per token) with a small
draft model on a 24 GiB card, with step times scaled so a CPU demo shows them in real time.
A decode step reads the weights and the KV cache every decoding sequence holds, at the bandwidth
that reads the weights in weight_read_ms, so a longer context makes each step longer and keeps it
memory-bound at a larger batch (where verifying more tokens per step is cheap).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

DEFAULT_SCENARIO = "tight-kv"

# Draft methods that run a second network (its weights, its own KV cache, its own steps).
# ngram/suffix look tokens up in the prompt: no weights, no KV, almost no time.
_DRAFT_COST_FACTORS = {
    # method: (weights, kv per token, step time) as fractions of the scenario's draft model
    "draft_model": (1.0, 1.0, 1.0),
    "eagle": (0.6, 0.25, 0.5),
    "eagle3": (0.6, 0.25, 0.5),
    "mtp": (0.6, 0.25, 0.5),
    "dflash": (0.6, 0.25, 0.35),
    "ngram": (0.0, 0.0, 0.05),
    "ngram_gpu": (0.0, 0.0, 0.05),
    "suffix": (0.0, 0.0, 0.05),
}


@dataclass(frozen=True)
class DraftCost:
    weights_mib: float
    kv_kib_per_token: float
    step_ms: float


@dataclass(frozen=True)
class Scenario:
    """Physics of one simulated deployment. Memory in MiB, times in ms, alpha per draft token."""

    name: str
    description: str
    # --- memory, as vLLM's profiler sees it
    gpu_total_mib: float = 24576.0
    target_weights_mib: float = 15360.0
    draft_weights_mib: float = 1024.0
    kv_kib_per_token: float = 128.0          # target model: layers x kv heads x head dim x 2 x 2 bytes
    draft_kv_kib_per_token: float = 16.0     # the draft model keeps its own KV cache
    activation_base_mib: float = 1536.0      # CUDA context, graphs, non-torch allocations
    # Sampler rows are vocab-wide fp32 (logits, target probs, draft probs): the profiled peak
    # grows with the tokens a step may verify, max_num_seqs x (K + 1).
    activation_mib_per_token: float = 1.5
    # --- step cost (roofline-like)
    fixed_ms: float = 8.0                    # scheduler, launch, sampling overhead per step
    weight_read_ms: float = 30.0             # one pass over the target weights (memory bound); with
    # target_weights_mib it gives the memory bandwidth that also reads the KV cache (kv_read_ms)
    compute_ms_per_token: float = 0.12       # per verified token once compute bound
    draft_step_ms: float = 1.5               # one draft-model step for the whole batch
    prefill_ms_per_token: float = 0.03
    # --- acceptance and lengths
    alpha: float = 0.8                       # P(draft token accepted | previous ones accepted), T = 0
    # the same on a chat-formatted request (/v1/chat/completions: the chat template applied); < 0 = alpha. A
    # drafter trained on chat data matches the target better there (sglang #6985), or worse (ROCm/ATOM #609)
    alpha_chat: float = -1.0
    natural_stop_prob_per_token: float = 0.01  # EOS chance per token when ignore_eos is off
    # the drafter's acceptance per category of content (issue 28): (word, alpha) pairs; a prompt whose first
    # such word is "code" gets that alpha instead of `alpha` (--sim-set category_alpha=code:0.9,chat:0.4)
    category_alpha: tuple[tuple[str, float], ...] = ()
    max_model_len: int = 4096
    # --- per-batch-size schedule (num_speculative_tokens_per_batch_size); vLLM issue #49548 (0.27.1, H100)
    # measured TPOT +6.6 % at concurrency 2 with a schedule on, even where it scheduled K = 0:
    schedule_step_ms: float = 2.5            # every step while a schedule is on (6.6 % of fixed + weight read)
    k_switch_ms: float = 0.0                 # a verifying step whose K differs from the previous one's
    # --- process life
    startup_s: float = 1.5                   # weights load, profiling, KV allocation, graph capture
    # --- noise (off by default): a busy or throttled GPU, as multiplicative factors of mean 1
    step_jitter_frac: float = 0.0            # each step's time x lognormal(sigma = this)
    speed_drift_frac: float = 0.0            # every speed_drift_s of engine time a new speed factor, same law
    speed_drift_s: float = 3.0
    # --- restart spread (off by default): each server life (process start) draws its own speed factor,
    # lognormal of mean 1 with this relative SD, and an acceptance offset added to every alpha (normal, this SD),
    # from --seed and the life's name (sim/restart.py): a real server lands elsewhere after each restart
    restart_spread_frac: float = 0.0
    restart_alpha_sd: float = 0.0

    def draft_cost(self, method: str) -> DraftCost:
        family = next((m for m in ("ngram", "eagle", "mtp") if m in method), "draft_model")
        weights, kv, step = _DRAFT_COST_FACTORS.get(method, _DRAFT_COST_FACTORS[family])
        return DraftCost(self.draft_weights_mib * weights, self.draft_kv_kib_per_token * kv,
                         self.draft_step_ms * step)

    def kv_read_ms(self, kib: float) -> float:
        """Reading `kib` of KV cache at the bandwidth that reads the target weights in weight_read_ms."""
        if self.weight_read_ms <= 0 or self.target_weights_mib <= 0:
            return 0.0
        return kib / 1024.0 / self.target_weights_mib * self.weight_read_ms

    def alpha_at(self, temperature: float, *, chat: bool = False, category: str = "") -> float:
        """Sampling spreads the target distribution, so drafts match it less often. The acceptance at
        temperature 0: the request's category's (category_of, category_alpha) if it has one, else alpha_chat
        for a chat-formatted request where the scenario sets one, else alpha."""
        names = dict(self.category_alpha)
        if category in names:
            alpha = names[category]
        elif chat and self.alpha_chat >= 0:
            alpha = self.alpha_chat
        else:
            alpha = self.alpha
        return alpha * (1.0 - 0.5 * min(max(temperature, 0.0), 1.0))

    def category_of(self, words: list[str]) -> str:
        """The content's category: the first of its words that names one in category_alpha ("" for none)."""
        if not self.category_alpha:
            return ""
        names = dict(self.category_alpha)
        return next((word for word in (w.strip(".,:;!?()[]\"'").lower() for w in words) if word in names), "")


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            name="tight-kv",
            description=(
                "High acceptance (alpha 0.8) but little KV memory left after weights: at 64-96 users "
                "(prompt 128 + output 64) a larger K shrinks the pool (activation peak) and reserves "
                "more slots per sequence, so the real batch drops and preemptions appear."
            ),
            gpu_total_mib=24576.0,
            activation_base_mib=3072.0,
        ),
        Scenario(
            name="roomy-kv",
            description=(
                "High acceptance (alpha 0.8) on an 80 GiB card: the KV pool holds every sequence even "
                "at K = 8 and 128 users; only compute limits large K at high concurrency."
            ),
            gpu_total_mib=81920.0,
        ),
        Scenario(
            name="low-acceptance",
            description=(
                "Same memory as tight-kv but a poor drafter (alpha 0.2): each extra draft token is "
                "verified and almost always thrown away, so larger K only wastes compute and KV."
            ),
            gpu_total_mib=24576.0,
            activation_base_mib=3072.0,
            alpha=0.2,
        ),
        Scenario(
            name="switch-collapse",
            description=(
                "tight-kv, but a step that changes K costs 250 ms more (a stall, as users of vLLM 0.27.1 "
                "reported at a schedule's batch-size threshold, vLLM issue #49548): a per-batch-size schedule "
                "whose boundary the real batch keeps crossing collapses there; one K is unaffected."
            ),
            gpu_total_mib=24576.0,
            activation_base_mib=3072.0,
            k_switch_ms=250.0,
        ),
        Scenario(
            name="long-context",
            description=(
                "Shaped on vLLM PR #48944 (H100 NVL, a 31B FP8 target with its drafter, 256 users, a cached "
                "shared prefix): a 94 GB card, 30 GiB of weights, 28 KiB of KV per token (so 256 sequences of "
                "4,000 tokens fit) and a cheap prefill. Every decode step reads the KV each running sequence "
                "holds: at 256 users and a 400-token context the step is compute-bound and K = 3 loses; at "
                "4,000 tokens it stays memory-bound and K = 3 gains (benchmarks/sim_fidelity.py --context)."
            ),
            gpu_total_mib=89645.0,
            target_weights_mib=30720.0,
            draft_weights_mib=1536.0,
            kv_kib_per_token=28.0,
            draft_kv_kib_per_token=4.0,
            compute_ms_per_token=0.11,
            draft_step_ms=4.0,
            prefill_ms_per_token=0.002,
            alpha=0.7,
            max_model_len=8192,
        ),
        Scenario(
            name="chat-drafter",
            description=(
                "A drafter trained on chat data (as the Llama-3 EAGLE head of sglang #6985): alpha 0.85 on "
                "chat-formatted requests, 0.3 on raw completions, on an 80 GiB card with a costly verify "
                "(compute_ms_per_token 1.0). At 12 users (prompt 64 + output 24) K = 4 wins on "
                "/v1/chat/completions and K = 0 on /v1/completions: the endpoint turns the answer."
            ),
            gpu_total_mib=81920.0,
            compute_ms_per_token=1.0,
            alpha=0.3,
            alpha_chat=0.85,
        ),
        Scenario(
            name="bench-10ms",
            description=(
                "For benchmarks/sim_fidelity.py: every step lasts exactly 10 ms whatever the batch, on an "
                "80 GiB card, so 256 streams fit and the schedule is known in advance; a check of the "
                "simulator's own timing, not a deployment."
            ),
            gpu_total_mib=81920.0,
            fixed_ms=10.0,
            weight_read_ms=0.0,
            compute_ms_per_token=0.0,
            draft_step_ms=0.0,
            prefill_ms_per_token=0.0,
            natural_stop_prob_per_token=0.0,
            schedule_step_ms=0.0,
            startup_s=0.3,
        ),
    )
}


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        known = ", ".join(sorted(SCENARIOS))
        raise ValueError(f"unknown simulation scenario {name!r}; known: {known}") from None


def category_alphas(text: str) -> tuple[tuple[str, float], ...]:
    """"code:0.9,chat:0.4" -> (("code", 0.9), ("chat", 0.4)); ValueError naming the fix otherwise."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition(":")
        try:
            alpha = float(value)
        except ValueError:
            alpha = -1.0
        if not name.strip() or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"category_alpha: {item!r}: write WORD:ALPHA pairs, ALPHA in [0, 1], e.g. code:0.9,chat:0.4")
        pairs.append((name.strip().lower(), alpha))
    return tuple(pairs)


def with_overrides(scenario: Scenario, overrides: dict[str, str]) -> Scenario:
    """Scenario with some fields replaced from `name=value` text (for tests and experiments)."""
    types = {f.name: f.type for f in fields(Scenario)}
    values: dict[str, object] = {}
    for key, text in overrides.items():
        if key not in types or key in ("name", "description"):
            raise ValueError(f"unknown scenario field {key!r}")
        if key == "category_alpha":
            values[key] = category_alphas(text)
            continue
        values[key] = int(text) if types[key] in ("int", int) else float(text)
    return replace(scenario, **values)
