"""The report's "Your requests" section (issue 28) and its in-effect column (issue 29) in a real browser.

A run folder of a sweep with a request set is written from synthetic raw files: a set of two categories, "code"
(long answers, acceptance length 2.5) and a hostile name that is markup (short answers, 1.25), answered under K=0
and K=3 at one stage of 8 users. Under K=3 the window completes 60 % more "code" answers and 10 % fewer of the hostile
category, each as fast as under K=0 (a closed loop's composition, no gain of either: issue 36), and
three of the 40 requests came back different (two in length, one more in text only). finalize() renders it from
those files alone, as `lookahead-runner report RUN_DIR` does; headless Chromium opens report.html offline and
dumps the DOM after the scripts ran. Every figure checked is computed here from the rows written, not read back
from decision.json. Skipped when no Chromium binary is installed (Debian: `apt-get install -y chromium`).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lookahead_runner.config import SweepConfig
from lookahead_runner.contracts.records import REQUEST_COLUMNS
from lookahead_runner.run.verdict.finalize import finalize
from lookahead_runner.vllm.probe import SPEC_METRICS_FLAG
from test_report_browser import chromium, console_messages, page_requests, run_chromium  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e

# 39 characters (a category is at most 40): if it ever runs as markup, the page's title says so.
HOSTILE = '<script>document.title="pwned"</script>'
CODE = "code"
PER_CATEGORY = 20
K = 3
USERS = 8
T0_S = 1_760_000_000.0
STAGE_S = 24.0
WARMUP_S = 2.0
SENT = {0: {CODE: 30, HOSTILE: 30}, K: {CODE: 48, HOSTILE: 27}}   # per life: 60 % more code, 10 % less hostile
# per request: (steps, accepted tokens) of vLLM's per-request metrics under K=3, and so its acceptance length
SPEC = {CODE: (40, 60), HOSTILE: (8, 2)}
OTHER_LENGTH = {5, 25}       # request indices whose K=3 answer had another length (and text)
OTHER_TEXT = {7}             # ... the same length, another text


def output_tokens(index: int) -> int:
    return 100 + index if index < PER_CATEGORY else 8 + index % 8


def write_set(path: Path) -> None:
    lines = [{"prompt": f"Write code number {i}", "max_tokens": 120, "category": CODE} for i in range(PER_CATEGORY)]
    lines += [{"prompt": f"Say hello {i}", "max_tokens": 16, "category": HOSTILE} for i in range(PER_CATEGORY)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def life_requests(k: int) -> pd.DataFrame:
    """Every request of one life, spread evenly over the stage in a fixed shuffled order of categories."""
    rng = np.random.default_rng(k)
    order = [CODE] * SENT[k][CODE] + [HOSTILE] * SENT[k][HOSTILE]
    rng.shuffle(order)
    seen = {CODE: 0, HOSTILE: 0}
    rows = []
    for j, category in enumerate(order):
        index = seen[category] % PER_CATEGORY + (0 if category == CODE else PER_CATEGORY)
        seen[category] += 1
        tokens, digest = output_tokens(index), f"h{index}"
        if k and index in OTHER_LENGTH:
            tokens, digest = tokens - 3, f"other{index}"
        if k and index in OTHER_TEXT:
            digest = f"other{index}"
        t_done = T0_S + (j + 0.5) * STAGE_S / len(order)
        e2e_ms = 900.0
        steps, accepted = SPEC[category] if k else (None, None)
        t_send = t_done - e2e_ms / 1000
        rows.append({"stage": 0, "users": USERS, "t_send_s": t_send, "t_first_token_s": t_send + 0.05,
                     "t_done_s": t_done, "ttft_ms": 50.0, "e2e_ms": e2e_ms, "itl_p50_ms": 8.0, "itl_p99_ms": 12.0,
                     "tpot_ms": 8.5, "prompt_tokens": 12, "output_tokens": tokens, "chunks": tokens, "ok": 1,
                     "error": "", "lag_p99_ms": 1.0, "request_index": index, "category": category, "set_round": 0,
                     "output_hash": digest,
                     "finish_reason": "stop", "spec_acceptance_length": 1 + accepted / steps if k else None,
                     "spec_acceptance_rate": accepted / (steps * k) if k else None, "spec_steps": steps,
                     "spec_draft_tokens": steps * k if k else None, "spec_accepted_tokens": accepted})
    return pd.DataFrame(rows, columns=list(REQUEST_COLUMNS))


def write_life(folder: Path, k: int) -> pd.DataFrame:
    folder.mkdir(parents=True)
    requests = life_requests(k)
    requests.to_csv(folder / "requests.csv", index=False)
    pd.DataFrame([[0, USERS, T0_S, T0_S + STAGE_S]], columns=["stage", "users", "t_start_s", "t_end_s"]).to_csv(
        folder / "stages.csv", index=False)
    server, gpu = [], []
    for second in range(int(STAGE_S) + 1):
        drafts = second * USERS * 10 if k else None   # K drafted tokens per step: in effect
        server.append([T0_S + second, USERS, 0, 0.3, 0, second * USERS * 40, drafts, drafts * k if k else None,
                       drafts * k * 0.5 if k else None])
        gpu.append([T0_S + second, 70_000 + 300 * k, 81_559])
    pd.DataFrame(server, columns=["t_s", "running", "waiting", "kv_usage", "preemptions_total",
                                  "generation_tokens_total", "spec_drafts_total", "spec_draft_tokens_total",
                                  "spec_accepted_total"]).to_csv(folder / "server_metrics.csv", index=False)
    pd.DataFrame(gpu, columns=["t_s", "used_mib", "total_mib"]).to_csv(folder / "gpu.csv", index=False)
    (folder / "status.json").write_text(json.dumps({"state": "done", "reason": ""}), encoding="utf-8")
    return requests


def write_run(run_dir: Path) -> dict[int, pd.DataFrame]:
    write_set(run_dir / "set.jsonl")
    config = SweepConfig.model_validate({
        "name": "request-set-browser", "server": {"model": "org/model"}, "speculation": {"k": [0, K]},
        "load": {"requests": str(run_dir / "set.jsonl"), "output_tokens": "natural", "temperature": 0.0,
                 "stages": [{"users": USERS, "duration_s": STAGE_S}], "warmup_s": WARMUP_S, "preflight_s": 0},
        "decision": {"target_users": USERS, "confirm": "off"},
    })
    lives, written = [], {}
    for k in (0, K):
        argv = ["vllm", "serve", "org/model"]
        if k:
            argv += ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": k}),
                     SPEC_METRICS_FLAG, "summary"]
        lives.append({"setting": f"k{k}", "k": k, "repeat": 0, "argv": argv, "dir": f"k{k}/r0"})
        written[k] = write_life(run_dir / f"k{k}" / "r0", k)
    plan = {"version": 1, "run_id": "request-set-browser", "created": "2025-01-01T00:00:00+0000",
            "probe": {"version": "0.32.0", "help_source": "--help=all", "flags": ["--speculative-config",
                      SPEC_METRICS_FLAG], "flags_count": 2, "knob": "--speculative-config",
                      "lookahead_flag": "absent", "command": ["vllm"]},
            "config": config.model_dump(mode="json"), "target_users": USERS, "is_simulator": False, "lives": lives}
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=1), encoding="utf-8")
    return written


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, dict[int, pd.DataFrame]]:
    run_dir = tmp_path_factory.mktemp("run")
    written = write_run(run_dir)
    return finalize(run_dir), written   # what `lookahead-runner report RUN_DIR` runs


@pytest.fixture(scope="module")
def dom(chromium, rendered, tmp_path_factory) -> str:  # noqa: F811 (the imported fixture)
    report, _ = rendered
    tmp = tmp_path_factory.mktemp("chromium")
    net_log = tmp / "net.json"
    done = run_chromium(chromium, tmp / "profile", report.as_uri(), "--enable-logging=stderr", "--v=0",
                        f"--log-net-log={net_log}", "--dump-dom")
    assert console_messages(done.stderr) == []
    assert page_requests(net_log) == []
    return done.stdout


def section(dom: str) -> str:
    start = dom.index('<section id="your-requests">')
    return dom[start:dom.index("</section>", start)]


def table(dom: str, table_id: str) -> list[list[str]]:
    """The rows of a table in the DOM as cell texts (unescaped), the header row left out."""
    start = dom.index(f'id="{table_id}"')
    body = dom[start:dom.index("</table>", start)]
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S) if "<td" in row]


def lead(text: str) -> float:
    """The figure before its interval: "2.50 [2.50, 2.50]" -> 2.5."""
    match = re.fullmatch(r"([\d.,]+) \[([\d.]+), ([\d.]+)\]", text)
    assert match, text
    assert float(match[2]) <= float(match[1].replace(",", "")) <= float(match[3]), f"outside its interval: {text}"
    return float(match[1].replace(",", ""))


def test_the_section_shows_each_categorys_acceptance_both_weightings_and_the_hostile_name_as_text(dom, rendered):
    _, written = rendered
    assert "pwned" not in re.search(r"<title>(.*?)</title>", dom, re.S)[1], "a category ran as a script"
    assert HOSTILE not in dom and '<script>document.title="pwned"' not in dom   # never markup, anywhere
    text = section(dom)
    assert "&lt;script&gt;document.title=" in text   # shown as text
    facts = html.unescape(re.sub(r"<[^>]+>", "", text))
    assert f"{CODE} {PER_CATEGORY}, {HOSTILE} {PER_CATEGORY}" in facts   # the set's categories and their sizes
    assert "each response's own metrics (--per-request-spec-decode-metrics summary)" in facts
    assert f"the runner added {SPEC_METRICS_FLAG} summary to every life with K > 0" in facts

    rows = {(row[0], int(row[1])): row for row in table(dom, "acceptance-by-category")}
    assert set(rows) == {(CODE, K), (HOSTILE, K), ("the mix", K)}   # K=0 drafts nothing: no row
    spec = written[K]
    for category, (steps, accepted) in SPEC.items():
        _, _, requests, pooled, request_weighted, token_weighted, larger = rows[(category, K)]
        assert requests == f"{PER_CATEGORY} ({SENT[K][category]} answers)"   # the set's requests, answered again
        for shown in (pooled, request_weighted, token_weighted):   # one acceptance length for every request
            assert lead(shown) == pytest.approx(1 + accepted / steps, abs=0.005)
        assert larger == "equal"
    own, tokens = spec["spec_acceptance_length"], spec["output_tokens"]
    _, _, requests, pooled, request_weighted, token_weighted, larger = rows[("the mix", K)]
    assert requests == f"{2 * PER_CATEGORY} ({len(spec)} answers)"
    assert lead(pooled) == pytest.approx(1 + spec["spec_accepted_tokens"].sum() / spec["spec_steps"].sum(), abs=0.005)
    # every request once: 20 of each category at 2.5 and 1.25, however often each was answered (48 code answers, 27)
    assert lead(request_weighted) == pytest.approx(own.groupby(spec["request_index"]).mean().mean(), abs=0.005)
    assert lead(token_weighted) == pytest.approx((own * tokens).sum() / tokens.sum(), abs=0.005)
    assert lead(token_weighted) > lead(request_weighted) + 0.3 and larger == "token > request"  # long code weighs


def test_the_section_judges_each_category_by_its_speed_per_request_the_agreement_share_and_the_lengths(dom, rendered):
    """Issue 36: K=3 completed 60 % more code answers in its window (the closed loop's composition), each as fast
    as under K=0: that is no gain of the category. The speeds table shows each category's mean output tokens per
    second of a request as the rows give them, its change against K=0, and the verdicts say so."""
    _, written = rendered
    in_window = {k: frame[frame["t_done_s"] >= T0_S + WARMUP_S] for k, frame in written.items()}
    counts = {k: frame["category"].value_counts() for k, frame in in_window.items()}
    assert counts[K][CODE] > 1.4 * counts[0][CODE] and counts[K][HOSTILE] < counts[0][HOSTILE]
    speed = {k: frame.assign(speed=frame["output_tokens"] / (frame["e2e_ms"] / 1000)).groupby(
        ["category", "request_index"])["speed"].mean().groupby(level=0).mean() for k, frame in in_window.items()}
    # every request once: its answers averaged
    rows = {(row[0], int(row[1])): row for row in table(dom, "speed-by-category")}
    assert set(rows) == {(c, k) for c in (CODE, HOSTILE, "the mix") for k in (0, K)}
    for category in (CODE, HOSTILE):
        assert lead(rows[(category, 0)][3]) == pytest.approx(speed[0][category], abs=0.05)
        assert lead(rows[(category, K)][3]) == pytest.approx(speed[K][category], abs=0.05)
        assert rows[(category, 0)][4] == "baseline"
        gain = speed[K][category] / speed[0][category] - 1
        assert rows[(category, K)][4].startswith(f"{100 * gain:+.1f} % [")
        assert abs(gain) < 0.05                          # the same requests, as fast: no +60 % anywhere
    answered = pd.concat(in_window.values()).groupby("category")["request_index"].nunique()
    share = answered / answered.sum()
    for k in (0, K):   # the mix: the categories' speeds at their shares of the requests, the same under every K
        assert lead(rows[("the mix", k)][3]) == pytest.approx(sum(w * speed[k][c] for c, w in share.items()), abs=0.05)
    verdicts = [html.unescape(re.sub(r"<[^>]+>", "", item)) for item in
                re.findall(r"<li>(.*?)</li>", re.search(r'<ul id="best-by-category">(.*?)</ul>', dom, re.S)[1], re.S)]
    assert sorted(v.split(": ")[0] for v in verdicts[:-1]) == sorted([HOSTILE, CODE])
    assert all(" per request at K=3" in v and "+60" not in v for v in verdicts[:-1]), verdicts
    assert verdicts[-1].startswith(f"the mix: K={K}, ") and "per request against K=0" in verdicts[-1]

    matched = len(set(written[0]["request_index"]) & set(written[K]["request_index"]))
    assert matched == 2 * PER_CATEGORY
    length_share = 100 * (matched - len(OTHER_LENGTH)) / matched
    text_share = 100 * (matched - len(OTHER_LENGTH) - len(OTHER_TEXT)) / matched
    agreement = html.unescape(re.search(r'<dd id="output-agreement">(.*?)</dd>', dom, re.S)[1])
    assert agreement == (f"{length_share:.1f} % of {matched} requests answered under two K or more had the same "
                         f"output length in every K, {text_share:.1f} % the same text (hashed)")

    lengths = {row[0]: row for row in table(dom, "set-lengths")}
    both = pd.concat(written.values(), ignore_index=True)
    assert set(lengths) == {CODE, HOSTILE, "the mix"} and list(lengths)[-1] == "the mix"
    for category, frame in (*both.groupby("category"), ("the mix", both)):
        assert int(lengths[category][1]) == len(frame)
        assert lengths[category][3].split(" / ")[-1] == f"{frame['output_tokens'].max():,}"   # the longest answer


def test_the_evidence_shows_the_tokens_drafted_per_step_of_each_k(dom):
    start = dom.index("<th>drafted / step</th>")
    body = dom[dom.rindex("<table", 0, start):dom.index("</table>", start)]
    header = re.findall(r"<th>(.*?)</th>", body)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]
    drafted = {int(row[0]): row[header.index("drafted / step")] for row in rows if row}
    assert set(drafted) == {0, K}
    assert float(drafted[K]) == pytest.approx(K)        # the counters: K draft tokens per draft step
    assert not re.fullmatch(r"[\d.]+", drafted[0])      # K=0 drafts nothing: the empty mark, not a number
