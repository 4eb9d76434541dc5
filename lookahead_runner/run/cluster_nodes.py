"""One probe for the cluster: vLLM probed on a worker node, and every node compared before any life.

The driver may have no vLLM at all (a laptop steering a GPU cluster): the vLLM that counts is the workers'. So
with cluster.engine = "ray" the probe (`--version`, `serve --help=all`, the schedule question) runs on the
first slot's node, and one slot on every other node reports what its node has: the vLLM version
`server.command --version` prints there, the models and driver of the GPUs Ray gave the slot (NVML), and
whether each model path of the config can be read there. Nodes that differ in any of these would turn a node
into a hidden factor of every K's figures, so the sweep is refused before any life, naming the nodes. A
resumed run compares the nodes with the vLLM version its plan.json was probed on.

`node_facts` runs on a node (I/O); `differences` and `unreadable` are pure.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..config import ResolvedServer, SweepConfig
from ..telemetry.visible_gpus import VISIBLE_ENV, nvml_visible
from ..vllm.probe import Capabilities, ProbeError, probe_version, run_probe


@dataclass(frozen=True)
class NodeFacts:
    """What one node has, as a slot there found it."""

    node: str                      # "IP/Ray node id" (nodes may share an IP)
    vllm: str = ""                 # the version `server.command --version` printed there; "" with `error`
    gpu_models: tuple[str, ...] = ()
    driver: str = ""               # the NVIDIA driver version; "" on a node without NVML
    unreadable: tuple[str, ...] = ()   # "server.model = PATH" entries this node cannot read
    error: str = ""                # the probe failed there (said with its output's last line)
    caps: Capabilities | None = None   # the full probe, from the first node only


def model_paths(config: SweepConfig) -> dict[str, str]:
    """The config's models that are filesystem paths (every node must have them); a hub name is downloaded."""
    models = {"server.model": config.server.model}
    if config.speculation.method in ("draft_model", "eagle", "eagle3") and config.speculation.draft_model:
        models["speculation.draft_model"] = config.speculation.draft_model
    return {name: path for name, path in models.items() if path.startswith(("/", "./", "../", "~"))}


def node_facts(node: str, server: ResolvedServer, paths: dict[str, str], full_probe: bool, pynvml=None) -> NodeFacts:
    """This node's facts (run on the node by a slot); `full_probe`: the whole probe, for the sweep's Capabilities."""
    masked, secrets = server.masked, server.secrets
    argv, env = secrets.resolve_argv(masked.command), secrets.resolve_env(masked.env)
    models, driver = _gpus(pynvml)
    missing = tuple(f"{name} = {path}" for name, path in paths.items() if not _readable(path))
    try:
        caps = run_probe(argv, env=env) if full_probe else None
        version = caps.version if caps else probe_version(argv, env=env)
    except ProbeError as err:
        return NodeFacts(node, gpu_models=models, driver=driver, unreadable=missing,
                         error=secrets.mask_text(str(err)))
    return NodeFacts(node, version, models, driver, missing, caps=caps)


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


def differences(facts: list[NodeFacts], probed_version: str = "") -> str:
    """One line naming the nodes that differ in vLLM version, GPU models or driver ("" when they agree);
    `probed_version`: a resumed run's vLLM (plan.json), which every node must still run."""
    failed = [f for f in facts if f.error]
    if failed:
        return (f"the vLLM probe failed on node {failed[0].node}: {failed[0].error}"
                + (f" (and on {len(failed) - 1} more node{'s' if len(failed) > 2 else ''})" if len(failed) > 1 else ""))
    if probed_version:
        odd = [f for f in facts if f.vllm != probed_version]
        if odd:
            return (f"this run was probed on vLLM {probed_version} (plan.json) but node {odd[0].node} runs vLLM "
                    f"{odd[0].vllm}: resume on the install it was planned on, or start a new run")
    for what, value in (("vLLM", lambda f: f.vllm), ("GPU models", lambda f: ", ".join(f.gpu_models) or "no GPU"),
                        ("NVIDIA driver", lambda f: f.driver or "none")):
        groups: dict[str, list[str]] = {}
        for f in facts:
            groups.setdefault(value(f), []).append(f.node)
        if len(groups) > 1:
            listed = "; ".join(f"{v} on {', '.join(nodes)}" for v, nodes in groups.items())
            return f"the cluster's nodes differ in {what} ({listed}), refused before any life: {FIX}"
    return ""


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
    """The nodes compared before any life, and what they had: a slot Ray places later (its GPUs were held by
    another job) on a node not seen yet is held to the same."""

    reference: NodeFacts
    node_ids: set[str]
    server: ResolvedServer
    paths: dict[str, str]
    probed_version: str = ""

    def admit(self, slot) -> str:
        """"" when `slot` may join the sweep, else why not (one line)."""
        import ray

        if slot.where.node_id in self.node_ids:
            return ""
        try:
            facts = ray.get(slot.actor.facts.remote(self.server, self.paths, False))
        except ray.exceptions.RayError as err:
            return f"its node could not be probed: {first_line(err)}"
        problem = differences([self.reference, facts], self.probed_version) or unreadable([facts])
        if not problem:
            self.node_ids.add(slot.where.node_id)
        return problem


def probe_cluster(slots, config: SweepConfig, server: ResolvedServer, probed_version: str = "") -> Capabilities | None:
    """The probe on the first slot's node and every other node's facts, in parallel; the cluster refused (a
    ProbeError: one line) where they differ. Returns the probe (None for a resumed run: plan.json has it); `slots`
    (cluster.RaySlots) keeps what was compared, for slots that join later."""
    import ray

    one_per_node = list({slot.where.node_id: slot for slot in slots.slots}.values())
    paths = model_paths(config)
    try:
        facts = ray.get([slot.actor.facts.remote(server, paths, n == 0 and not probed_version)
                         for n, slot in enumerate(one_per_node)])
    except ray.exceptions.RayError as err:
        raise ProbeError(f"the probe on the cluster's nodes failed: {first_line(err)}") from None
    problem = differences(facts, probed_version) or unreadable(facts)
    if problem:
        raise ProbeError(problem)
    slots.nodes = NodeCheck(facts[0], {slot.where.node_id for slot in one_per_node}, server, paths, probed_version)
    return facts[0].caps


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
