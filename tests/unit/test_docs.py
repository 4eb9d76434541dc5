"""The README and the docs site hold together: no host path in what a reader sees, and every page the README,
another page or the code cites exists and is in the site's nav (mkdocs.yml), so `mkdocs build --strict` and a
reader following a citation both find it. The pages are written for users: no issue numbers or development
history (CHANGELOG.md holds it), docs/index.md lists the nav's pages in its order, one demo time and one test
time, and every link to a glossary term lands on it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = next(folder for folder in Path(__file__).resolve().parents if (folder / "pyproject.toml").is_file())
DOCS = REPO / "docs"
PUBLISHED = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md", REPO / "mkdocs.yml",
             *sorted(DOCS.rglob("*.md"))]

# a folder of one machine: this host's work and scratch folders, a home folder (/home/NAME, /root, ~/, /Users/NAME)
HOST_PATH = re.compile(r"(?<![\w.$-])(?:/work(?:/|\b)|/tmp(?:/|\b)|/home/\w|/root(?:/|\b)|/Users/\w|~/)")


def host_paths(text: str) -> list[str]:
    """The lines of `text` that name a host path."""
    return [line.strip() for line in text.splitlines() if HOST_PATH.search(line)]


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda p: str(p.relative_to(REPO)))
def test_no_host_path_in_what_a_reader_sees(path):
    assert host_paths(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("line", ["see /work/bench/decision-accuracy", "--recordings /tmp/wt20-ma", "under /tmp",
                                  "a lock under /work", "cd ~/lookahead", "in /home/alice/runs", "/root/.cache/pip",
                                  "/Users/bob/runs"])
def test_the_host_path_check_sees_each_kind(line):
    assert host_paths(f"ok\n{line}\nok") == [line]


@pytest.mark.parametrize("line", ["reports/<run>/report.html", "http://127.0.0.1:8000/v1/completions", "tests/unit/",
                                  "$PWD/sim_gpu.json", "docs/method.md", "KV/work ratio", "/metrics and /health"])
def test_the_host_path_check_passes_repository_paths_and_urls(line):
    assert host_paths(line) == []


def _nav_pages() -> set[str]:
    return set(re.findall(r":\s*([\w/-]+\.md)\s*$", (REPO / "mkdocs.yml").read_text(encoding="utf-8"), re.M))


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert {"index.md", "method.md", "decision-statistics.md", "layout.md", "reliability.md"} <= pages
    assert _nav_pages() == pages


def _cited(text: str) -> set[str]:
    """docs/NAME.md citations (a README link, a docstring's "(docs/method.md)")."""
    return set(re.findall(r"\bdocs/([\w/-]+\.md)\b", text))


def test_every_page_the_readme_or_the_code_cites_exists():
    readme = _cited((REPO / "README.md").read_text(encoding="utf-8"))
    code = set().union(*(_cited(path.read_text(encoding="utf-8")) for path in (REPO / "lookahead_runner").rglob("*.py")))
    assert {"method.md", "decision-statistics.md"} <= code  # rules/signals and stats cite them
    assert "layout.md" in readme
    assert sorted(name for name in readme | code if not (DOCS / name).is_file()) == []


def test_the_code_cites_pages_by_their_docs_path():
    """A bare "(method.md)" names no file a reader can find."""
    bare = [f"{path.relative_to(REPO)}: {match}" for path in (REPO / "lookahead_runner").rglob("*.py")
            for match in re.findall(r"(?<![\w/.-])([\w-]+\.md)\b", path.read_text(encoding="utf-8"))]
    assert bare == []


def test_pages_link_only_to_pages_that_exist():
    """Relative links between pages (what --strict checks too, here without mkdocs installed)."""
    broken = []
    for page in DOCS.rglob("*.md"):
        for target in re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).is_file():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert broken == []


def test_the_readme_stays_short():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_the_config_reference_is_what_the_models_write():
    """docs/reference/config.md is written from the configuration models (the docs build rewrites it); a model
    changed without it fails here: run `python -m lookahead_runner.config.reference`."""
    from lookahead_runner.config.reference import PAGE, reference_text

    assert (DOCS / PAGE).read_text(encoding="utf-8") == reference_text(), \
        "docs/reference/config.md is stale: run python -m lookahead_runner.config.reference"


def test_the_docs_build_writes_the_config_reference():
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docs/hooks/config_reference.py" in config and (DOCS / "hooks" / "config_reference.py").is_file()


# Pages written for users: what the runner does, not how it came to be (CHANGELOG.md holds that).
USER_PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md", *sorted(DOCS.rglob("*.md"))]

# "issue 21", "issue #38", "issues 21/22/23", "(#38)": this project's own tracker. Upstream references stay:
# "vLLM issue #49548", "vLLM #53436", "PR #48944" (four digits and more, or named by their project).
OUR_ISSUE = re.compile(r"(?<!vLLM )(?<!upstream )\bissues?\s+#?\d+|(?<![\w/#])#\d{1,2}\b", re.I)


def our_issue_numbers(text: str) -> list[str]:
    """The lines of `text` that name one of this project's issues."""
    return [line.strip() for line in text.splitlines() if OUR_ISSUE.search(line)]


@pytest.mark.parametrize("path", USER_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_issue_number_in_a_user_page(path):
    assert our_issue_numbers(path.read_text(encoding="utf-8")) == [], \
        f"{path.relative_to(REPO)} names an issue of this project: say what it does, history goes to CHANGELOG.md"


# How the project was worked on, which a user cannot look up (the issue-number check above covers the rest).
HISTORY = re.compile(r"\b(?:previous|this|other) sessions?'?s?\b|\(new[,:)]|\bit used to\b", re.I)


@pytest.mark.parametrize("path", USER_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_development_history_in_a_user_page(path):
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if HISTORY.search(line)]
    assert lines == [], f"{path.relative_to(REPO)}: development history belongs in CHANGELOG.md"


@pytest.mark.parametrize("line", ["decided by the previous session's engine", "other sessions' tests running",
                                  "* `reaper.py` (new): the watchdog", "like Ctrl-C (it used to kill the runner"])
def test_the_history_check_sees_each_kind(line):
    assert HISTORY.search(line)


@pytest.mark.parametrize("line", ["starts `vllm serve` in its own session", "a new life", "the key used to sign"])
def test_the_history_check_passes_a_process_session(line):
    assert not HISTORY.search(line)


@pytest.mark.parametrize("line", ["since issue 39: faster", "before issue 23 (plan schema 1)", "(issue #38)",
                                  "issues 21/22/23", "Issue 21's bar", "the lives (#38)"])
def test_the_issue_check_sees_each_kind(line):
    assert our_issue_numbers(f"ok\n{line}\nok") == [line]


@pytest.mark.parametrize("line", ["vLLM #53436 measured", "vLLM issue #49548, vLLM 0.27.1", "vLLM PR #48944",
                                  "(upstream #32374)", "upstream issue #42690", "(ROCm/ATOM #609)",
                                  "[a](decision.md#the-stop-rule)", "row 16", "#6985"])
def test_the_issue_check_passes_upstream_references(line):
    assert our_issue_numbers(line) == []


def _nav_order() -> list[str]:
    return re.findall(r":\s*([\w/-]+\.md)\s*$", (REPO / "mkdocs.yml").read_text(encoding="utf-8"), re.M)


def _index_table_order() -> list[str]:
    """The pages docs/index.md's table links, each once, in the order of its rows."""
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    return [re.match(r"\| \[[^\]]+\]\(([\w/-]+\.md)\)", row).group(1) for row in rows]


def test_the_index_lists_every_nav_page_and_only_those():
    """docs/index.md is the map of the site: a page added to the nav and not to the index (or the reverse) fails."""
    nav = set(_nav_order()) - {"index.md"}
    index = set(_index_table_order())
    assert {"missing from index.md": sorted(nav - index), "not in the nav": sorted(index - nav)} == \
        {"missing from index.md": [], "not in the nav": []}


def test_the_index_follows_the_nav_order():
    assert _index_table_order() == [page for page in _nav_order() if page != "index.md"]


def test_the_changelog_holds_the_history():
    assert (REPO / "CHANGELOG.md").is_file()


DEMO_TIME = "4-5 minutes on 2 cores"
TEST_TIME = "about 7 min"  # the README's test command, four workers on 2 cores (415 s in a fresh clone, 2026-12-06)


@pytest.mark.parametrize("path, figure", [("README.md", DEMO_TIME), ("docs/index.md", DEMO_TIME),
                                          ("README.md", TEST_TIME), ("CONTRIBUTING.md", TEST_TIME)])
def test_the_demo_and_the_test_times_are_one_figure_on_every_page(path, figure):
    """The pages that state how long the demo or the test command takes state the same figure."""
    assert figure in (REPO / path).read_text(encoding="utf-8")


@pytest.mark.parametrize("path", ["README.md", "CONTRIBUTING.md", "docs/index.md"])
def test_no_other_demo_or_test_time_is_stated(path):
    text = (REPO / path).read_text(encoding="utf-8")
    stated = re.findall(r"(?:about|~)\s*\d+(?:-\d+)?\s*min(?:utes)?(?: on 2 cores)?|\d+-\d+ minutes on 2 cores", text)
    assert set(stated) <= {DEMO_TIME, f"{TEST_TIME} on 2 cores"}, stated


def _slug(heading: str) -> str:
    """The anchor mkdocs (toc) and GitHub both give a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))


def test_every_glossary_link_lands_on_a_term():
    """Pages link a term's first use to docs/glossary.md#TERM; the README's links are read on GitHub too, so
    the anchors are the headings' own (no {#id})."""
    glossary = (DOCS / "glossary.md").read_text(encoding="utf-8")
    terms = {_slug(heading) for heading in re.findall(r"^#{2,3} (.+)$", glossary, re.M)}
    assert "{#" not in glossary
    assert {"server-life", "per-batch-size-schedule", "tie-band", "knee", "restart-spread", "capacity-within-the-slo",
            "rate-stage-open-loop", "objective-slo-goodput", "pre-flight", "acceptance"} <= terms
    links = [(path.relative_to(REPO).as_posix(), anchor) for path in [REPO / "README.md", *DOCS.rglob("*.md")]
             for anchor in re.findall(r"glossary\.md#([\w-]+)\)", path.read_text(encoding="utf-8"))]
    assert len(links) >= 10
    assert [link for link in links if link[1] not in terms] == []


def test_the_glossary_slug_is_the_headings_own():
    assert _slug('Confidence, resamples, "not decided yet"') == "confidence-resamples-not-decided-yet"
    assert _slug("K (the lookahead)") == "k-the-lookahead"


# Pages for developers: where the code lives, how it works inside, the tests that show each fault handled, how to
# test and what was measured. They may name modules and test files; a page for users may not (a user who installed
# the wheel has neither), and says what the runner does in words.
DEVELOPER_PAGES = [REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md", DOCS / "layout.md",
                   DOCS / "internals.md", DOCS / "reliability.md"]
PAGES_FOR_USERS = [path for path in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))] if path not in DEVELOPER_PAGES]

# A module or test of this project: a path into the package or tests/, any .py file (vLLM's own source, vllm/...,
# cited for a fact about vLLM, stays: a user can read it in the vLLM they run), or a module of the package by its
# dotted name (the simulator's command, `python -m lookahead_runner.sim serve`, stays: a user runs it).
CODE_CITATION = re.compile(r"(?<![\w/.-])(?:lookahead_runner/|tests/|(?!vllm/)[\w./-]+\.py\b)"
                           r"|\blookahead_runner\.(?!sim\b(?!\.))\w")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)   # not shown to a reader


def code_citations(text: str) -> list[str]:
    """The lines of `text` a reader sees that name a module or a test file of this project."""
    return [line.strip() for line in HTML_COMMENT.sub("", text).splitlines() if CODE_CITATION.search(line)]


def test_the_developer_pages_exist_and_are_in_their_own_nav_section():
    assert all(path.is_file() for path in DEVELOPER_PAGES)
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    section = nav[nav.index("  - For developers:"):]
    assert all(f": {path.relative_to(DOCS).as_posix()}" in section for path in DEVELOPER_PAGES if DOCS in path.parents)


@pytest.mark.parametrize("path", PAGES_FOR_USERS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_user_page_names_a_module_or_a_test_file(path):
    assert code_citations(path.read_text(encoding="utf-8")) == [], \
        f"{path.relative_to(REPO)}: say what it does; the module or test goes to docs/internals.md"


@pytest.mark.parametrize("line", ["drawn at once (`decision/cells/resample.py`)", "(`lookahead_runner/decision/`)",
                                  "tests/e2e/test_capacity_sim.py, one run", "on a real card (`tests/gpu/`, one run)",
                                  "python -m lookahead_runner.sim.open_loop --k 0,2,4", "telemetry/sampler.py",
                                  "measured by `benchmarks/decision_accuracy.py`", "`locustfiles/completions.py`",
                                  "the reader (lookahead_runner.config.reference)", "see variants.py"])
def test_the_code_citation_check_sees_each_kind(line):
    assert code_citations(f"ok\n{line}\nok") == [line]


@pytest.mark.parametrize("line", ["vLLM's `vllm/config/speculative.py` lists them", "`vllm/benchmarks/serve.py`",
                                  "`python -m lookahead_runner.sim serve MODEL --port 8000`",
                                  '`["python", "-m", "lookahead_runner.sim"]`', "pip install lookahead_runner-*.whl",
                                  "[the method](method.md), docs/method.md", "the request set chat.jsonl",
                                  "<!-- tests/unit/test_docs.py checks it -->", "vLLM 0.32.0, tests and figures"])
def test_the_code_citation_check_passes_what_a_user_can_read_or_run(line):
    assert code_citations(line) == []


# The names of the formulas: on the statistics page, where each is written out; a page for users says what the
# interval or the rule does in plain words and links there.
FORMULA_NAMES = re.compile(r"\b(?:Wilson|design effect|Jeffreys|Haybittle|Peto|Newcombe|bootstrap|order statistics?|"
                           r"binomial|multinomial|Student|chi-square|F test|Cauchy|Monte Carlo|degrees of freedom|"
                           r"posterior|batch means)\b", re.I)
STATISTICS_PAGE = DOCS / "decision-statistics.md"
CODE_BLOCK = re.compile(r"^```.*?^```|^    \S.*?$", re.M | re.S)   # fenced, or indented by four spaces


@pytest.mark.parametrize("path", [p for p in PAGES_FOR_USERS if p != STATISTICS_PAGE],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_a_user_page_says_the_statistics_in_words_and_leaves_the_formulas_to_their_page(path):
    """The prose; what the runner prints, quoted in a code block, is quoted as it is."""
    prose = CODE_BLOCK.sub("", path.read_text(encoding="utf-8"))
    lines = [line.strip() for line in prose.splitlines() if FORMULA_NAMES.search(line)]
    assert lines == [], f"{path.relative_to(REPO)}: in plain words, the formula on docs/decision-statistics.md"


def test_the_statistics_page_holds_the_formulas():
    text = STATISTICS_PAGE.read_text(encoding="utf-8")
    assert {"wilson", "design effect", "jeffreys", "haybittle", "bootstrap", "student", "f test"} <= {
        match.lower() for match in FORMULA_NAMES.findall(text)}


def test_the_index_opens_with_your_first_sweep_on_a_gpu():
    """Before the map of the site: from a `vllm serve` line to a dry run, the sweep, the wall time, the verdict."""
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "Your first sweep on a GPU"
    first = text[text.index("## Your first sweep on a GPU"):text.index(f"## {headings[1]}")]
    assert "vllm serve" in first and "--dry-run" in first and "lookahead-runner sweep" in first
    assert re.search(r"\d+ (?:minutes|hours?)\b", first) and "verdict" in first
