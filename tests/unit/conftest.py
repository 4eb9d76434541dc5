import pytest

from lookahead_runner.config import loading
from lookahead_runner.config.cluster import check_ray_installed


@pytest.fixture
def ray_installed(monkeypatch):
    """A config with cluster.engine = "ray" loads as where Ray is installed, whether or not it is here (the README's
    test command installs '.[test]' only); the check itself: test_cluster_config.py."""
    monkeypatch.setattr(loading, "check_ray_installed",
                        lambda cluster, source="config": check_ray_installed(cluster, source, find=lambda name: True))
