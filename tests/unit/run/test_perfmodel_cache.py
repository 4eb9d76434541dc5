"""The performance model's fit kept in the run folder under its inputs' hash (run/verdict/perfmodel_run.py
FolderFitStore): the same inputs read back, not fitted again (a report that changed only thresholds); other
windows, another seed or a damaged file: fitted again."""
from __future__ import annotations

import numpy as np
import pytest
from unit.perfmodel_world import SHAPE, World

from lookahead_runner.decision.perfmodel import model as model_module
from lookahead_runner.decision.perfmodel.model import fit_performance_model
from lookahead_runner.run.verdict.perfmodel_run import FolderFitStore

WORLD = World()


@pytest.fixture
def fits(monkeypatch):
    """Counts the bootstraps actually run."""
    calls = []
    real = model_module.bootstrap

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(model_module, "bootstrap", counted)
    return calls


def fit(store, evidence=None, **options):
    return fit_performance_model(evidence or WORLD.evidence(), SHAPE, WORLD.positions((2, 4, 8)), resamples=20,
                                 store=store, **options)


def test_the_same_inputs_are_read_back_and_a_new_error_bound_only_judges_them(tmp_path, fits):
    store = FolderFitStore(tmp_path)
    first = fit(store)
    again = fit(FolderFitStore(tmp_path), error_bound=1e-6)         # a stricter threshold: the same fit
    assert len(fits) == 1 and store.path.is_file()
    np.testing.assert_array_equal(first.params.step_ms, again.params.step_ms)
    assert [h.predicted_requests_per_s for h in first.held_out] == [h.predicted_requests_per_s for h in again.held_out]
    assert first.trusted and not again.trusted                       # judged against the new bound


def test_other_windows_another_seed_or_a_damaged_file_are_fitted_again(tmp_path, fits):
    store = FolderFitStore(tmp_path)
    fit(store)
    fit(store, seed=1)
    fewer = WORLD.evidence()
    fewer = type(fewer)({key: cell for key, cell in fewer.cells.items() if key[1] != max(fewer.users)},
                        fewer.target_users)
    fit(store, evidence=fewer)
    store.path.write_text("{not json", encoding="utf-8")
    fit(store)
    assert len(fits) == 4


def test_a_read_only_folder_still_fits(tmp_path, fits):
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")            # .cache cannot be made under a file
    model = fit(FolderFitStore(blocked))
    assert model.params.step_ms.shape == (20,) and len(fits) == 1


def test_a_grid_value_that_is_a_path_is_kept_too(tmp_path, fits):
    """A grid value names a file of its own: a draft model's path ("org/draft") or any text is kept as well."""
    for value in ("org/draft-1b", "../up", "a b:c"):
        store = FolderFitStore(tmp_path, value)
        fit(store)
        fit(FolderFitStore(tmp_path, value))
        assert store.path.is_file() and store.path.parent == tmp_path / ".cache"
    assert len(fits) == 3
    assert len({FolderFitStore(tmp_path, v).path for v in ("a/b", "a_b", "a b", "")}) == 4


def test_a_fit_kept_by_another_release_is_fitted_again(tmp_path, fits, monkeypatch):
    """The fit's code can change from one release to the next (FIT_VERSION is raised by hand): a fit another
    release kept is not read back."""
    import importlib.metadata

    fit(FolderFitStore(tmp_path))
    installed = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "99.0.0" if name == "lookahead-runner" else installed(name))
    fit(FolderFitStore(tmp_path))
    assert len(fits) == 2
