"""The performance model as the adaptive chooser sees it (adaptive_sweep.view_of): its predictions at the target with
the held-out error there, which the chooser rules a K out against (decision/perfmodel/prior.py)."""
from unit.perfmodel_world import SHAPE, World

from lookahead_runner.config import config_from_dict
from lookahead_runner.decision.perfmodel.model import fit_performance_model
from lookahead_runner.run.strategies.adaptive_sweep import view_of


def test_a_trusted_model_gives_the_chooser_its_held_out_error_at_the_target():
    world = World()
    model = fit_performance_model(world.evidence(), SHAPE, world.positions(), resamples=10)
    config = config_from_dict({"speculation": {"k": [0, 2, 4, 8]}, "sweep": {"strategy": "adaptive"},
                               "load": {"stages": [{"users": 32, "duration_s": 20}, {"users": 64, "duration_s": 20}]},
                               "decision": {"target_users": 64}})
    view = view_of(model, config)
    assert model.trusted and view.trusted and sorted(view.predictions) == [0, 2, 4, 8]
    at_target = [abs(h.error) for h in model.held_out if h.users == 64]
    assert at_target and view.heldout_error == model.heldout_error_at(64).value and view.error_scope == ""
    assert view.heldout_error == max(at_target) and view.unit == "req/s"   # the largest there, not the median
    # the skip's bound is formed on each of those errors, at the early-stop bar's error (1 - 99 %)
    assert sorted(map(abs, view.heldout_errors)) == sorted(at_target) and round(view.skip_level, 6) == 0.01
