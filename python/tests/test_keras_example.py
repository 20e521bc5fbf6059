"""examples/keras_digits.py, a Keras user's script with only its import changed, learns the digits: its fit
holds out the last tenth for validation, its callbacks run, and evaluate agrees with predict.

The model opens its own session, on ``$WGCOMPUTE_ADAPTER`` if set (the run below sets "vulkan": on lavapipe an
epoch of this small model takes about 0.1 s there)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import ROOT, example_fixture

example = example_fixture("keras_digits_example", ROOT / "examples" / "keras_digits.py")


def test_the_keras_script_learns_the_digits(example, monkeypatch, capsys):
    monkeypatch.setenv("WGCOMPUTE_ADAPTER", "vulkan")
    result = example.run(epochs=12, batch_size=32, seed=0, verbose=2)
    out = capsys.readouterr().out
    history = result["history"]
    epochs = len(history["loss"])
    assert 1 <= epochs <= 12 and out.count("Epoch ") == epochs
    assert sorted(history) == ["accuracy", "learning_rate", "loss", "val_accuracy", "val_loss"]
    # 1,347 training images, the last 10% (135) held out for validation: ceil(1212 / 32) = 38 steps an epoch.
    assert f"{math.ceil(1212 / 32)}/{math.ceil(1212 / 32)} - " in out
    assert 'Model: "sequential' in out and "Total params: 4,810" in out
    assert history["loss"][-1] < history["loss"][0] / 3
    assert np.isfinite(history["val_loss"]).all()
    assert result["test_accuracy"] >= 0.9, result
    # evaluate's accuracy is predict's argmax against the labels.
    assert result["test_accuracy"] == pytest.approx(result["predicted_accuracy"])
