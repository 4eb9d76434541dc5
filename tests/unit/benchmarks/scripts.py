"""The scripts under benchmarks/ are scripts, not a package: a test loads the one it checks by path (`load`)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def load(name: str) -> ModuleType:
    """benchmarks/`name`.py as the module `name`, registered in sys.modules before it runs (its dataclasses look their
    module up there), with benchmarks/ on sys.path (the sibling scripts it imports); the one loaded already, if any."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
