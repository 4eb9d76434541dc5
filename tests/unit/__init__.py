"""Unit tests, one folder per folder of the package (tests/unit/decision/ tests lookahead_runner/decision/).

A package, like each of its folders: pytest imports a test as unit.<folder>.<file> with tests/ on sys.path, so
no folder named like an installed package (vllm/) is ever put on sys.path, and two folders may hold files of
the same name. Shared helpers: unit.synthetic (decision windows), unit.perfmodel_world (a performance world)."""
