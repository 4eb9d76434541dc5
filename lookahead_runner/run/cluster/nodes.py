"""One probe for the cluster: vLLM probed on a worker node, and every node and slot compared before any life.

The driver may have no vLLM at all (a laptop steering a GPU cluster): the vLLM that counts is the workers'. So
with cluster.engine = "ray" the probe (`--version`, `serve --help=all`, the schedule question) runs on the
first slot's node, one slot on every other node reports the vLLM version `server.command --version` prints
there, and every slot reports the rest: the lookahead-runner and Python versions its node runs (a life's
analysis runs there), the models and driver of the GPUs Ray gave that slot (NVML), and whether each model path
of the config can be read there. Nodes or slots that differ in any of these would turn a GPU into a hidden
factor of every K's figures, so the sweep is refused before any life, naming them. A resumed run compares the
nodes with the vLLM version its plan.json was probed on.

`node_facts` runs on a node (I/O); `differences`, `unreadable` and `cause_line` are pure.
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import re
from dataclasses import dataclass, replace

from ...config import ResolvedServer, SweepConfig
from ...telemetry.visible_gpus import VISIBLE_ENV, nvml_visible
from ...vllm.probe import Capabilities, ProbeError, probe_version, run_probe


@dataclass(frozen=True)
class NodeFacts:
    """What one node has, as a slot there found it."""

    node: str                      # "IP/Ray node id" (nodes may share an IP)
    vllm: str = ""                 # the version `server.command --version` printed there; "" with `error`
    gpu_models: tuple[str, ...] = ()   # of the slot's GPUs
    driver: str = ""               # the NVIDIA driver version; "" on a node without NVML
    unreadable: tuple[str, ...] = ()   # "server.model = PATH" entries this node cannot read
    error: str = ""                # the probe failed there (said with its output's last line)
    caps: Capabilities | None = None   # the full probe, from the first node only
    runner: str = ""               # lookahead-runner's version there
    python: str = ""               # its Python's
    slot: str = ""                 # the slot that found them (its GPUs); "" = the node's first


def model_paths(config: SweepConfig) -> dict[str, str]:
    """The config's models that are filesystem paths (every node must have them); a hub name is downloaded."""
    models = {"server.model": config.server.model}
    if config.speculation.method in ("draft_model", "eagle", "eagle3") and config.speculation.draft_model:
        models["speculation.draft_model"] = config.speculation.draft_model
    return {name: path for name, path in models.items() if path.startswith(("/", "./", "../", "~"))}


PROBES = ("full", "version", "none")  # the whole probe (the sweep's Capabilities), vLLM's version, or neither


def node_facts(node: str, slot: str, server: ResolvedServer, paths: dict[str, str], probe: str,
               pynvml=None) -> NodeFacts:
    """This node's and slot's facts (run there by the slot); vLLM probed as `probe` (PROBES) says."""
    masked, secrets = server.masked, server.secrets
    argv, env = secrets.resolve_argv(masked.command), secrets.resolve_env(masked.env)
    models, driver = _gpus(pynvml)
    missing = tuple(f"{name} = {path}" for name, path in paths.items() if not _readable(path))
    facts = NodeFacts(node, gpu_models=models, driver=driver, unreadable=missing, runner=_runner_version(),
                      python=platform.python_version(), slot=slot)
    try:
        caps = run_probe(argv, env=env) if probe == "full" else None
        version = caps.version if caps else probe_version(argv, env=env) if probe == "version" else ""
    except ProbeError as err:
        return replace(facts, error=secrets.mask_text(str(err)))
    return replace(facts, vllm=version, caps=caps)


def _runner_version() -> str:
    """The lookahead-runner installed where this runs (its package metadata)."""
    try:
        return importlib.metadata.version("lookahead-runner")
    except importlib.metadata.PackageNotFoundError:  # run from a source folder, not installed
        return "not installed"


def _readable(path: str) -> bool:
    path = os.path.expanduser(path)
    return os.path.exists(path) and os.access(path, os.R_OK)


def _gpus(pynvml=None) -> tuple[tuple[str, ...], str]:
    """The models of the GPUs this process may use (CUDA_VISIBLE_DEVICES mapped onto NVML) and the driver."""
    nvml, gpus = nvml_visible(os.environ.get(VISIBLE_ENV), pynvml)
    if nvml is None:  # a CPU node
        return (), ""
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        names = [nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(gpu.index)) for gpu in gpus]
    except Exception:  # a driver that cannot say
        return (), ""
    text = [name.decode() if isinstance(name, bytes) else str(name) for name in names]
    return tuple(sorted(text)), driver.decode() if isinstance(driver, bytes) else str(driver)


FIX = ("give every node the same install and GPUs (or start the sweep on a cluster of the nodes that match: "
       "docs/cluster.md)")


# what is compared, most telling first: (what, its value, whose it is: a node's or a slot's)
COMPARED = (("vLLM", lambda f: f.vllm, "node"), ("lookahead-runner", lambda f: f.runner, "node"),
            ("Python", lambda f: f.python, "node"),
            ("GPU models", lambda f: ", ".join(f.gpu_models) or "no GPU", "slot"),
            ("NVIDIA driver", lambda f: f.driver or "none", "node"))


def differences(facts: list[NodeFacts], probed_version: str = "") -> str:
    """One line naming the nodes (or slots) that differ in vLLM, lookahead-runner or Python version, GPU models or
    driver ("" when they agree); `probed_version`: a resumed run's vLLM (plan.json), which every node must still
    run. A slot whose node's vLLM another slot probed carries that slot's version (with_node_versions)."""
    failed = [f for f in facts if f.error]
    if failed:
        return (f"the vLLM probe failed on node {failed[0].node}: {failed[0].error}"
                + (f" (and on {len(failed) - 1} more node{'s' if len(failed) > 2 else ''})" if len(failed) > 1 else ""))
    if probed_version:
        odd = [f for f in facts if f.vllm != probed_version]
        if odd:
            return (f"this run was probed on vLLM {probed_version} (plan.json) but node {odd[0].node} runs vLLM "
                    f"{odd[0].vllm}: resume on the install it was planned on, or start a new run")
    for what, value, whose in COMPARED:
        groups: dict[str, list[str]] = {}
        for f in facts:
            where = groups.setdefault(value(f), [])
            label = (f.slot or f.node) if whose == "slot" else f.node
            if label not in where:
                where.append(label)
        if len(groups) > 1:
            listed = "; ".join(f"{v} on {', '.join(labels)}" for v, labels in groups.items())
            return f"the cluster's {whose}s differ in {what} ({listed}), refused before any life: {FIX}"
    return ""


def with_node_versions(facts: list[NodeFacts]) -> list[NodeFacts]:
    """Each slot's facts with its node's vLLM version, probed by one slot there (the first that has it)."""
    versions: dict[str, str] = {}
    for f in facts:
        if f.vllm:
            versions.setdefault(f.node, f.vllm)
    return [f if f.vllm or f.error else replace(f, vllm=versions.get(f.node, "")) for f in facts]


def unreadable(facts: list[NodeFacts]) -> str:
    """One line naming a model path a node cannot read ("" when every node reads every path)."""
    short = [f for f in facts if f.unreadable]
    if not short:
        return ""
    more = f" (and {len(short) - 1} more node{'s' if len(short) > 2 else ''})" if len(short) > 1 else ""
    return (f"{short[0].unreadable[0]}: not readable on node {short[0].node}{more}; put it at that path on every "
            "node, or give a model name each node can download")


@dataclass
class NodeCheck:
    """The nodes and slots compared before any life, and what they had: a slot Ray places later (its GPUs were held
    by another job) is held to the same, its node's vLLM probed where no slot there was compared yet."""

    reference: NodeFacts
    node_ids: set[str]
    server: ResolvedServer
    paths: dict[str, str]
    probed_version: str = ""

    def admit(self, slot) -> str:
        """"" when `slot` may join the sweep, else why not (one line)."""
        import ray

        new_node = slot.where.node_id not in self.node_ids
        try:
            facts = ray.get(slot.actor.facts.remote(self.server, self.paths, "version" if new_node else "none"))
        except ray.exceptions.RayError as err:
            return f"it could not be probed: {cause_line(err)}"
        if not new_node:  # its node's vLLM is the one compared already
            facts = replace(facts, vllm=self.reference.vllm)
        problem = differences([self.reference, facts], self.probed_version) or unreadable([facts])
        if not problem:
            self.node_ids.add(slot.where.node_id)
        return problem


def probe_cluster(slots, config: SweepConfig, server: ResolvedServer, probed_version: str = "") -> Capabilities | None:
    """The probe on the first slot's node, vLLM's version on every other node and every slot's facts, in parallel;
    the cluster refused (a ProbeError: one line) where they differ. Returns the probe (None for a resumed run:
    plan.json has it); `slots` (slots.RaySlots) keeps what was compared, for slots that join later."""
    import ray

    placed = slots.slots
    probing: dict[str, object] = {}  # node id -> the slot that probes its vLLM
    for slot in placed:
        probing.setdefault(slot.where.node_id, slot)

    def probe(slot) -> str:
        if probing[slot.where.node_id] is not slot:
            return "none"
        return "full" if slot is placed[0] and not probed_version else "version"

    paths = model_paths(config)
    try:
        facts = with_node_versions(ray.get([slot.actor.facts.remote(server, paths, probe(slot)) for slot in placed]))
    except ray.exceptions.RayError as err:
        raise ProbeError(f"the probe on the cluster's nodes failed: {cause_line(err)}") from None
    problem = differences(facts, probed_version) or unreadable(facts)
    if problem:
        raise ProbeError(problem)
    slots.nodes = NodeCheck(facts[0], set(probing), server, paths, probed_version)
    return facts[0].caps


ANSI = re.compile(r"\x1b\[[0-9;]*m")
RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")
CAUSE_CHARS = 300


def cause_line(err: BaseException) -> str:
    """Why a Ray call failed, in one line: what the slot's code raised (a RayTaskError's cause), else the last
    exception Ray's message quotes (an actor's creation task: a node without the package), else its last line
    (the banner "The actor died unexpectedly..." comes first, the cause last)."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException) and cause is not err:
        text = f"{type(cause).__name__}: {cause}"
        return (text.strip().splitlines() or [type(cause).__name__])[0][:CAUSE_CHARS]
    lines = [line for line in (ANSI.sub("", raw).strip() for raw in str(err).splitlines()) if line]
    raised = [line for line in lines if RAISED.match(line)]
    return ((raised or lines or [type(err).__name__])[-1])[:CAUSE_CHARS]
