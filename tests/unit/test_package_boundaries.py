"""Who may import whom (read from the source, nothing imported): the scenario side, the live dashboard
and the runner side stay apart, so each runs where it belongs (the runner never loads Locust's gevent
patching; the scenario runs without the runner's telemetry). Imports run down the floors and in no circle,
every file has a home (no module at the package's top but the commands; decision/ in subpackages; run/ in rooms
on floors of their own, its driver at its top), and tests/unit mirrors the package's folders."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "lookahead_runner"
UNIT_TESTS = Path(__file__).resolve().parent
LOCUST_SIDE = {"locust", "gevent", "flask", "geventhttpclient"}
# The Locust process's entry point: Locust loads it by its path and nothing imports it, so, like cli.py, it may wire
# the scenario to the live tabs above it; the scenario-side and floor checks leave it out.
LOCUSTFILE = PACKAGE / "workload" / "locustfile.py"


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved against its package)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _modules(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (PACKAGE / folder).rglob("*.py"))


# what both sides share (contracts/): the record schema (with its contract strings), the API key's variable and
# header, CPU lists
SHARED_CONTRACTS = ("lookahead_runner.contracts",)


@pytest.mark.parametrize("path", [p for p in _modules("workload") if p != LOCUSTFILE], ids=lambda p: p.name)
def test_the_scenario_side_imports_only_itself_and_the_shared_contracts(path):
    ours = {name for name in _imports(path) if name.startswith("lookahead_runner")}
    strays = {name for name in ours
              if not name.startswith(("lookahead_runner.workload", *SHARED_CONTRACTS)) and name != "lookahead_runner"}
    assert not strays, f"{path.name} imports {sorted(strays)}"


def test_nothing_in_the_package_imports_the_locustfile():
    """Importing it registers its Locust event handlers; a second copy would register them twice."""
    importers = [str(path.relative_to(PACKAGE)) for path in _modules(".")
                 if any(name.startswith("lookahead_runner.workload.locustfile") for name in _imports(path))]
    assert importers == []
    assert "lookahead_runner.live.webui" in _imports(LOCUSTFILE)  # the exemption is needed, and for this file


def _loads_locust(module: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether importing this module of ours loads Locust, gevent or Flask, directly or through our modules."""
    path = PACKAGE.parent / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if not path.is_file() or module in seen:
        return False
    names = _imports(path)
    return any(name.split(".")[0] in LOCUST_SIDE for name in names) or any(
        _loads_locust(name, seen | {module}) for name in names if name.startswith("lookahead_runner."))


RUNNER_SIDE = [p for p in _modules(".") if p.relative_to(PACKAGE).parts[0] not in ("workload", "live")]


@pytest.mark.parametrize("path", RUNNER_SIDE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_runner_side_never_loads_locust_nor_the_live_dashboard(path):
    """A pure scenario module may serve the runner too (config/loading.py checks --prompt-file with the reader the
    load uses); nothing that loads Locust may."""
    names = _imports(path)
    bad = {name for name in names if name.split(".")[0] in LOCUST_SIDE or name.startswith("lookahead_runner.live")
           or (name.startswith("lookahead_runner.workload") and _loads_locust(name))}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


@pytest.mark.parametrize("name", ["values.py", "tables.py", "charts.py"])
def test_the_live_dashboards_logic_is_pure(name):
    names = _imports(PACKAGE / "live" / name)
    assert not {n for n in names if n.split(".")[0] in LOCUST_SIDE}, name
    assert "lookahead_runner.live.webui" not in names


def test_the_import_reader_sees_relative_absolute_and_indirect_imports():
    names = _imports(PACKAGE / "runfolder" / "analysis.py")
    assert {"lookahead_runner.contracts.records", "lookahead_runner.telemetry.signals", "pandas"} <= names
    assert "lookahead_runner.contracts.records" in _imports(PACKAGE / "workload" / "timeline.py")
    assert _loads_locust("lookahead_runner.workload.user")  # imports locust itself
    assert _loads_locust("lookahead_runner.live.webui")  # and through workload.scenario
    assert not _loads_locust("lookahead_runner.workload.timeline")
    assert not any(_loads_locust(name) for name in SHARED_CONTRACTS)


# The house, lowest floor first (README "Layout"): a module imports its own floor and the ones below, never
# one above. A new top-level module or package must be given a floor here.
FLOORS = [
    {"contracts", "examples"},                        # shared leaves: the record schema, the load's API key, CPU lists;
                                                      # the example configs that ship (data, and their catalogue)
    {"vllm", "telemetry", "workload"},                # vLLM's facts, readings of a server, the Locust scenario
    {"config"},                                       # TOML -> a strict SweepConfig; workload variants, SLOs, secrets
    {"decision"},                                     # windows -> a typed Decision; the adaptive chooser (pure)
    {"runfolder"},                                    # the run folder's files: plan.json, status.json, summary rows
    {"report", "live", "sim"},                        # the report page, the live dashboard, the simulated vLLM
    {"run"},                                          # the runner side: sweep loop, server lives, Locust, finalize
                                                      # (its rooms have floors of their own: RUN_FLOORS)
    {"cli", "__main__", "__init__"},                  # the commands
]
FLOOR_OF = {unit: floor for floor, units in enumerate(FLOORS) for unit in units}


def _unit(module: str) -> str:
    """lookahead_runner.run.life.life -> "run"; lookahead_runner.config -> "config"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _arrows() -> set[tuple[str, str, str]]:
    """(importing file, its unit, the unit it imports) for every import between two units of the package."""
    arrows = set()
    for path in (p for p in _modules(".") if p != LOCUSTFILE):
        unit = _unit(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        for name in _imports(path):
            if name.startswith("lookahead_runner.") and _unit(name) != unit:
                arrows.add((str(path.relative_to(PACKAGE)), unit, _unit(name)))
    return arrows


def test_every_unit_of_the_package_has_a_floor():
    units = {_unit(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)) for p in _modules(".")}
    assert units - set(FLOOR_OF) == set(), "give each new module or package a floor in FLOORS"


def test_no_import_runs_back_up_the_floors():
    upward = sorted(f"{path} ({unit}, floor {FLOOR_OF[unit]}) imports {target} (floor {FLOOR_OF[target]})"
                    for path, unit, target in _arrows()
                    if target in FLOOR_OF and unit in FLOOR_OF and FLOOR_OF[target] > FLOOR_OF[unit])
    assert upward == []


def test_the_floor_check_reads_the_real_arrows():
    arrows = _arrows()
    assert ("run/runner.py", "run", "runfolder") in arrows and ("runfolder/plan.py", "runfolder", "decision") in arrows
    assert FLOOR_OF["runfolder"] > FLOOR_OF["decision"] and FLOOR_OF["run"] > FLOOR_OF["runfolder"]


# ------------------------------------------------------------------ no circle, every file at home

def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / Path(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _targets(path: Path) -> set[str]:
    """The modules of ours a file imports, at any depth of it (a function-level import counts): `from X import a`
    imports X.a where that is a module, else X (its __init__ where X is a package)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if _is_module(f"{module}.{alias.name}") else module)
    return {name for name in found if name.startswith("lookahead_runner") and _is_module(name)}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (or a module importing itself), Tarjan's way."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def _graph() -> dict[str, set[str]]:
    return {_module_name(path): _targets(path) for path in _modules(".")}


def test_no_import_circle_not_even_through_a_function_level_import():
    assert _circles(_graph()) == []


def test_the_circle_check_finds_a_circle_and_reads_function_level_imports():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"a"}}) == [["a"]] and _circles({"a": {"b"}, "b": set()}) == []
    graph = _graph()
    assert "lookahead_runner.run.verdict.perfmodel_run" in graph["lookahead_runner.run.verdict.finalize"]
    assert "lookahead_runner.report.render" in graph["lookahead_runner.run.verdict.finalize"]  # imported in a function
    assert "lookahead_runner.decision.gates.rules" in graph["lookahead_runner.decision.engine"]  # `from .gates import`


def test_no_module_at_the_package_top_but_the_commands():
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top <= {"__init__", "__main__", "cli"}, "give it a home in a folder of the package"


def test_every_folder_of_the_package_is_a_package():
    folders = {path for path in PACKAGE.rglob("*") if path.is_dir() and path.name != "__pycache__"
               and any(path.glob("*.py"))}
    assert [str(f.relative_to(PACKAGE)) for f in sorted(folders) if not (f / "__init__.py").is_file()] == []


# decision/ keeps at its top its entries (the engine, the decision at a rate, the ramp's decision, one per workload variant, the adaptive
# chooser and its standing, at the target concurrency and at a rate) and decision.json's schema; everything else lives in a
# subpackage named for its stage
DECISION_TOP = {"__init__", "engine", "rate_decision", "ramp", "per_variant", "adaptive", "standing", "rate_standing",
                "schema", "schema_base"}


def test_decision_is_built_of_subpackages():
    decision = PACKAGE / "decision"
    top = {path.stem for path in decision.glob("*.py")}
    assert top <= DECISION_TOP, f"put {sorted(top - DECISION_TOP)} in a subpackage of decision/"
    subpackages = sorted(p.name for p in decision.iterdir() if (p / "__init__.py").is_file())
    assert {"cells", "gates", "explanation", "confirmation", "perfmodel"} <= set(subpackages)
    assert all(len(list((decision / name).glob("*.py"))) >= 3 for name in subpackages)  # a group, not a wrapper


# run/ keeps at its top the sweep's driver (the loop, its checks before the first life, its progress display); the rest
# lives in rooms named for their part of the trip, on floors of their own, lowest first: a room imports itself and the
# rooms on the floors below, never a room above it nor one beside it on its floor (life/ and verdict/ stay apart)
RUN_TOP = {"__init__", "runner", "before_lives", "progress"}
RUN_FLOORS = [
    {"life", "verdict"},   # one server life's parts; the run folder's files -> tables, decision.json, report.html
    {"strategies"},        # which lives a sweep runs and when it stops: adaptive, capacity, the early stop, confirm
    {"cluster"},           # cluster.engine = "ray": the slots, the lives on them, their files back
    {""},                  # run/'s top: the sweep's driver
]
RUN_FLOOR_OF = {room: floor for floor, rooms in enumerate(RUN_FLOORS) for room in rooms}
RUN = "lookahead_runner.run"


def _room(module: str) -> str | None:
    """lookahead_runner.run.life.server -> "life"; lookahead_runner.run.runner -> "" (the top); outside run/ -> None."""
    if not module.startswith(RUN + "."):
        return None
    first = module[len(RUN) + 1:].split(".")[0]
    return first if (PACKAGE / "run" / first).is_dir() else ""


def _room_arrows(graph: dict[str, set[str]]) -> set[tuple[str, str, str, str]]:
    """(module, its room, the module it imports, that one's room) for every import between two rooms of run/."""
    return {(source, _room(source), target, _room(target)) for source, targets in graph.items() for target in targets
            if _room(source) is not None and _room(target) is not None and _room(source) != _room(target)}


def _room_arrows_not_down(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{source} ({room or 'top'}, floor {RUN_FLOOR_OF.get(room)}) imports {target} "
                  f"({to or 'top'}, floor {RUN_FLOOR_OF.get(to)})" for source, room, target, to in _room_arrows(graph)
                  if room not in RUN_FLOOR_OF or to not in RUN_FLOOR_OF or RUN_FLOOR_OF[to] >= RUN_FLOOR_OF[room])


def test_run_keeps_its_driver_at_the_top_and_the_rest_in_rooms():
    run = PACKAGE / "run"
    top = {path.stem for path in run.glob("*.py")}
    assert top <= RUN_TOP, f"put {sorted(top - RUN_TOP)} in a room of run/"
    rooms = {path.name for path in run.iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert rooms == set(RUN_FLOOR_OF) - {""}, "give each room of run/ a floor in RUN_FLOORS"
    for room in rooms:  # each says its part of the trip, and holds a group, not a wrapper
        assert ast.get_docstring(ast.parse((run / room / "__init__.py").read_text(encoding="utf-8"))), room
        assert len(list((run / room).glob("*.py"))) >= 3, room


def test_no_import_runs_back_up_runs_rooms_nor_across_a_floor():
    assert _room_arrows_not_down(_graph()) == []


def test_the_room_check_reads_the_real_arrows_and_flags_one_up_or_across():
    arrows = {(room, to) for _, room, _, to in _room_arrows(_graph())}
    assert {("cluster", "life"), ("cluster", "strategies"), ("strategies", "verdict"), ("", "cluster")} <= arrows
    assert ("lookahead_runner.run.cluster.worker_life", "cluster", "lookahead_runner.run.life.reaper", "life") in \
        _room_arrows(_graph())  # `from ..life import reaper`
    up = {f"{RUN}.life.load": {f"{RUN}.cluster.pool"}, f"{RUN}.verdict.finalize": {f"{RUN}.life.life"},
          f"{RUN}.strategies.ramp": {f"{RUN}.runner", f"{RUN}.life.launch"}}
    assert [line.split(" imports ")[1].split(" (")[0] for line in _room_arrows_not_down(up)] == [
        f"{RUN}.cluster.pool", f"{RUN}.runner", f"{RUN}.life.life"]  # up two floors, up to the top, across


def test_runs_rooms_form_no_circle():
    rooms: dict[str, set[str]] = {}
    for _, room, _, to in _room_arrows(_graph()):
        rooms.setdefault(room, set()).add(to)
    assert _circles(rooms) == []


def test_unit_tests_mirror_the_package_folders():
    """A unit test sits in the folder named for the package folder it tests (tests/unit/decision/ for
    lookahead_runner/decision/; benchmarks/ for the benchmark scripts' helpers); only this file, about the
    whole package, and test_docs.py, about the repository's pages, sit at the top."""
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} | {"benchmarks"}
    strays = sorted(str(path.relative_to(UNIT_TESTS)) for path in UNIT_TESTS.rglob("test_*.py")
                    if path.parent.name not in folders and path.name not in (Path(__file__).name, "test_docs.py"))
    assert strays == [], "move each into tests/unit/<the package folder it tests>/"
    assert all((UNIT_TESTS / name / "__init__.py").is_file() for name in folders if (UNIT_TESTS / name).is_dir())

