"""eval_mode: inference in eval mode that gives every submodule its own flag back (hmde.encoders.eval_mode)."""

from torch import nn

from hmde.encoders.eval_mode import eval_mode


def test_eval_mode_sets_eval_throughout_and_restores_each_submodules_own_flag():
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.1), nn.Linear(2, 2)))
    model.train()
    model[1].eval()  # a loaded sentence encoder in eval mode inside a model in training
    before = [m.training for m in model.modules()]
    assert before == [True, True, False, False, False]
    with eval_mode(model):
        assert not any(m.training for m in model.modules())
    assert [m.training for m in model.modules()] == before


def test_eval_mode_on_a_model_in_eval_mode_throughout_leaves_it_so():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)).eval()
    with eval_mode(model) as inside:
        assert inside is model and not any(m.training for m in model.modules())
    assert not any(m.training for m in model.modules())
