"""Custom Keras layers as Keras 3 code writes them: weights made by ``add_weight`` in ``build(input_shape)`` (in the
session of the first call), trained by ``fit``; saved with ``get_config`` (their own, or the arguments they were
made with) and loaded again bit for bit from the registry (``keras.saving.register_keras_serializable``),
``custom_objects=`` or a ``custom_object_scope``; refused with a message that says how when the class is not
found."""

from __future__ import annotations

import numpy as np
import pytest

import wgcompute as wg
from wgcompute import keras


@keras.saving.register_keras_serializable(package="Tests")
class Scale(keras.layers.Layer):
    """x · w (a weight per feature) + a fixed offset."""

    def __init__(self, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.offset = offset

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="random_normal", name="w")

    def call(self, x):
        return x * self.w + self.offset

    def get_config(self):
        config = super().get_config()
        config.update({"offset": self.offset})
        return config


class Shift(keras.layers.Layer):
    """Not registered, and no get_config: the argument it was made with is its config."""

    def __init__(self, by):
        super().__init__()
        self.by = by

    def call(self, x):
        return x + self.by


class Gates(keras.layers.Layer):
    """Weights kept in a list rather than attributes: tracked all the same."""

    def build(self, input_shape):
        self.parts = [self.add_weight(shape=(input_shape[-1],), initializer="ones") for _ in range(2)]
        self.count = self.add_weight(shape=(), initializer="zeros", trainable=False, name="count")

    def call(self, x):
        return x * self.parts[0] * self.parts[1]


def trained(session, rng, middle):
    model = keras.Sequential(
        [keras.Input(shape=(4,)), keras.layers.Dense(3, seed=1), *middle, keras.layers.Dense(2, seed=2)],
        device=session.adapter["backend"],
    )
    model.compile("adam", "mse")
    x = rng.normal(size=(24, 4)).astype(np.float32)
    model.fit(x, rng.normal(size=(24, 2)).astype(np.float32), batch_size=8, epochs=2, verbose=0)
    return model, x


def test_a_registered_custom_layer_trains_saves_and_loads_bit_for_bit(session, rng, tmp_path):
    model, x = trained(session, rng, [Scale(0.5)])
    scale = model.layers[1]
    assert [name for name, _ in scale.named_parameters()] == ["w"]
    assert not np.array_equal(scale.w.numpy(), np.zeros(3))  # drawn, then trained
    path = tmp_path / "custom.keras"
    model.save(path)
    with keras.models.load_model(path, device=session.adapter["backend"]) as loaded:
        assert type(loaded.layers[1]) is Scale and loaded.layers[1].offset == 0.5
        # Keras's names, given at construction, are the file's too.
        assert [layer.name for layer in loaded.layers] == [layer.name for layer in model.layers]
        assert model.layers[0].name.startswith("dense") and scale.name.startswith("scale")
        np.testing.assert_array_equal(loaded.layers[1].w.numpy(), scale.w.numpy())
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    model.close()
    assert keras.saving.get_custom_objects()["Tests>Scale"] is Scale
    assert keras.saving.get_registered_name(Scale) == "Tests>Scale"
    assert keras.saving.get_registered_object("Tests>Scale") is Scale
    assert keras.saving.get_registered_name(Shift) == "Shift"


def test_an_unregistered_layer_loads_from_custom_objects_or_a_scope(session, rng, tmp_path):
    model, x = trained(session, rng, [Shift(2.0)])
    assert model.layers[1].get_config()["by"] == 2.0
    path = tmp_path / "shift.keras"
    model.save(path)
    want = model.predict(x, verbose=0)
    model.close()
    backend = session.adapter["backend"]
    with pytest.raises(wg.CheckpointError, match="unknown layer class 'Shift'.*custom_objects"):
        keras.models.load_model(path, device=backend)
    with keras.models.load_model(path, custom_objects={"Shift": Shift}, device=backend) as loaded:
        assert loaded.layers[1].by == 2.0
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), want)
    with keras.saving.custom_object_scope({"Shift": Shift}):
        with keras.saving.load_model(path, device=backend) as loaded:
            np.testing.assert_array_equal(loaded.predict(x, verbose=0), want)
    with pytest.raises(wg.CheckpointError):
        keras.models.load_model(path, device=backend)  # the scope is closed
    with pytest.raises(TypeError):
        keras.models.load_model(path, custom_objects=[Shift], device=backend)


def test_weights_kept_in_a_list_are_tracked_and_state_is_not_trained(session, rng, tmp_path):
    model, _ = trained(session, rng, [Gates()])
    gates = model.layers[1]
    assert [name for name, _ in gates.named_parameters()] == ["weight_0", "weight_1"]
    assert [name for name, _ in gates.named_states()] == ["count"]
    assert not np.array_equal(gates.parts[0].numpy(), np.ones(3))  # trained
    assert gates.count.numpy() == 0.0
    path = tmp_path / "gates.keras"
    model.save(path)
    with keras.models.load_model(path, custom_objects={"Gates": Gates}, device=session.adapter["backend"]) as loaded:
        np.testing.assert_array_equal(loaded.layers[1].parts[1].numpy(), gates.parts[1].numpy())
    model.close()


def test_a_layer_that_cannot_describe_itself_is_refused_at_save(session, rng, tmp_path):
    class Opaque(keras.layers.Layer):
        def __init__(self, table):
            super().__init__()
            self.table = table

        def call(self, x):
            return x

    model, _ = trained(session, rng, [Opaque(object())])
    with pytest.raises(NotImplementedError, match="get_config"):
        model.save(tmp_path / "opaque.keras")
    model.close()


def test_add_weight_needs_the_building_call(session):
    with pytest.raises(wg.InvalidArgumentError, match="build"):
        Scale().add_weight(shape=(2,))
    with pytest.raises(wg.InvalidArgumentError):
        keras.saving.register_keras_serializable(package="a>b")
