"""wgcompute.save and wgcompute.load: an nn.Mlp with its optimizer's state round trips bit for bit (training
resumed from the file takes the steps the original takes), files are readable by safetensors.numpy and by
``wgcompute predict``; a dict of named tensors round trips; mistakes are refused."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
import safetensors.numpy

import wgcompute as wg


def train_steps(session, model, optimizer, batches):
    for x, y in batches:
        with wg.GradientTape() as tape:
            loss = wg.softmax_cross_entropy(model(session.tensor(x)), session.tensor(y)).mean()
        params = model.parameters()
        optimizer.apply_gradients(zip(tape.gradient(loss, params), params, strict=True))


def batches(rng, count, inputs=6, classes=4, rows=5):
    return [
        (rng.uniform(-1, 1, (rows, inputs)).astype(np.float32), rng.uniform(0, 1, (rows, classes)).astype(np.float32))
        for _ in range(count)
    ]


@pytest.mark.parametrize(
    "make_optimizer", [lambda: wg.optim.Adam(0.05), lambda: wg.optim.SGD(0.1, momentum=0.9)], ids=["adam", "sgd"]
)
def test_an_mlp_and_its_optimizer_round_trip_bit_for_bit(make_session, adapter, rng, tmp_path, make_optimizer):
    path = tmp_path / "model.safetensors"
    first, second = make_session(adapter), make_session(adapter)
    model = wg.nn.Mlp(first, [6, 9, 4], seed=int(rng.integers(2**32)))
    optimizer = make_optimizer()
    data = batches(rng, 5)
    train_steps(first, model, optimizer, data[:3])
    wg.save(path, model, optimizer, metadata={"note": "three steps"})

    restored_optimizer = make_optimizer()
    loaded = wg.load(path, second, optimizer=restored_optimizer)
    assert isinstance(loaded, wg.nn.Mlp) and loaded.sizes == [6, 9, 4]
    assert loaded.metadata["note"] == "three steps" and loaded.metadata["format"] == "wgcompute.mlp"
    assert restored_optimizer.iterations == 3
    for (name, a), (other, b) in zip(model.named_parameters(), loaded.named_parameters(), strict=True):
        assert name == other
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The state came back whole: two more steps on each side agree bit for bit.
    train_steps(first, model, optimizer, data[3:])
    train_steps(second, loaded, restored_optimizer, data[3:])
    for (name, a), (_, b) in zip(model.named_parameters(), loaded.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)

    stored = safetensors.numpy.load_file(str(path))
    slots = ("m", "v") if isinstance(optimizer, wg.optim.Adam) else ("momentum",)
    expected = {name for name, _ in model.named_parameters()}
    expected |= {f"optimizer.{slot}.{name}" for slot in slots for name, _ in model.named_parameters()}
    assert set(stored) == expected


def test_an_optimizer_used_in_another_order_is_saved_in_the_models(make_session, adapter, rng, tmp_path):
    """The file pairs state with parameters by position; an optimizer first stepped with the parameters in
    another order is reordered to the model's."""
    session = make_session(adapter)
    model = wg.nn.Mlp(session, [3, 4, 2], seed=3)
    adam = wg.optim.Adam(0.1)
    ((x, y),) = batches(rng, 1, inputs=3, classes=2)
    with wg.GradientTape() as tape:
        loss = wg.softmax_cross_entropy(model(x), y).mean()
    params = list(reversed(model.parameters()))
    adam.apply_gradients(zip(tape.gradient(loss, params), params, strict=True))
    path = tmp_path / "reordered.safetensors"
    wg.save(path, model, adam)
    stored = safetensors.numpy.load_file(str(path))
    # After one step from zero moments, m = (1 - β1) g: each parameter's m has its own shape.
    for name, parameter in model.named_parameters():
        assert stored[f"optimizer.m.{name}"].shape == parameter.shape
    other = wg.optim.Adam(0.1)
    stranger = session.variable(np.zeros(3))
    other.step([stranger], [session.tensor(np.ones(3))])
    with pytest.raises(wg.InvalidArgumentError, match="model"):
        wg.save(tmp_path / "other.safetensors", model, other)


def test_an_optimizer_whose_first_step_ran_out_of_memory_saves_and_steps(make_session, adapter, tmp_path):
    """A first step that runs out of memory part way through making the state (the bias's moments made, the
    weight's not) keeps none of it: the optimizer saves (with no state) rather than panicking on the missing
    moments, and steps once there is room."""
    # 1.25 MiB: a 256x256 layer and its gradients (514 KiB), 512 KiB of ballast and the bias's moments leave
    # less than the weight's first moment.
    session = make_session(adapter, memory_limit=1280 << 10)
    model = wg.nn.Mlp(session, [256, 256], seed=1)
    [layer] = model.layers
    params = [layer.bias, layer.weight]  # not the model's order: saving reorders the state
    gradients = [session.ones((256,)), session.ones((256, 256))]
    ballast = session.zeros((128 << 10,))
    adam = wg.optim.Adam(0.1)
    with pytest.raises(wg.OutOfMemoryError):
        adam.step(params, gradients)
    assert adam.iterations == 0 and adam._native.variable_count == 0
    names = {name for name, _ in model.named_parameters()}
    wg.save(tmp_path / "failed.safetensors", model, adam)
    assert set(safetensors.numpy.load_file(str(tmp_path / "failed.safetensors"))) == names
    del ballast
    # The failed step fixed no order either: this one, the model's, is the optimizer's first (and the save
    # then needs no reordered copy of the state, for which there would be no room).
    adam.step(model.parameters(), gradients[::-1])
    assert adam.iterations == 1 and adam._native.variable_count == 2
    wg.save(tmp_path / "stepped.safetensors", model, adam)
    stored = safetensors.numpy.load_file(str(tmp_path / "stepped.safetensors"))
    assert set(stored) == names | {f"optimizer.{slot}.{name}" for slot in ("m", "v") for name in names}
    for name, parameter in model.named_parameters():
        assert stored[f"optimizer.m.{name}"].shape == parameter.shape


def test_named_tensors_round_trip(make_session, adapter, rng, tmp_path):
    session = make_session(adapter)
    weights = rng.standard_normal((3, 5)).astype(np.float32)
    ids = rng.integers(0, 2**32, (7,), dtype=np.uint64).astype(np.uint32)
    path = tmp_path / "named.safetensors"
    wg.save(path, {"embedding": session.tensor(weights), "ids": session.tensor(ids)}, metadata={"epoch": 4})
    loaded = wg.load(path, session)
    assert set(loaded) == {"embedding", "ids"}
    np.testing.assert_array_equal(loaded["embedding"].numpy(), weights)
    np.testing.assert_array_equal(loaded["ids"].numpy(), ids)
    stored = safetensors.numpy.load_file(str(path))
    np.testing.assert_array_equal(stored["embedding"], weights)
    np.testing.assert_array_equal(stored["ids"], ids)
    # A file safetensors wrote loads as its tensors.
    foreign = tmp_path / "foreign.safetensors"
    safetensors.numpy.save_file({"w": weights}, str(foreign))
    np.testing.assert_array_equal(wg.load(foreign, session)["w"].numpy(), weights)


def test_wgcompute_predict_reads_a_saved_model(make_session, rng, tmp_path, wgcompute_binary):
    session = make_session("vulkan")
    model = wg.nn.Mlp(session, [5, 8, 3], seed=11)
    x = rng.uniform(-1, 1, (6, 5)).astype(np.float32)
    path, inputs, output = tmp_path / "m.safetensors", tmp_path / "x.npy", tmp_path / "p.npy"
    wg.save(path, model)
    np.save(inputs, x)
    done = subprocess.run(
        [str(wgcompute_binary), "predict", "--model", str(path), "--inputs", str(inputs), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "WGCOMPUTE_ADAPTER": "vulkan"},
    )
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(output), model(x).softmax().numpy(), rtol=1e-5, atol=1e-7)


def test_mistakes_are_refused(make_session, adapter, tmp_path):
    session = make_session(adapter)
    model = wg.nn.Mlp(session, [2, 3], seed=1)
    with pytest.raises(wg.InvalidArgumentError):
        wg.save(tmp_path / "x.safetensors", [model])
    with pytest.raises(wg.InvalidArgumentError):
        wg.save(tmp_path / "x.safetensors", {"a": np.zeros(3)})
    with pytest.raises(wg.InvalidArgumentError):
        wg.save(tmp_path / "x.safetensors", {"a": session.zeros(3)}, optimizer=wg.optim.Adam())
    with pytest.raises(wg.CheckpointError):
        wg.load(tmp_path / "missing.safetensors", session)
    named = tmp_path / "named.safetensors"
    wg.save(named, {"a": session.zeros(3)})
    with pytest.raises(wg.CheckpointError):
        wg.load(named, session, optimizer=wg.optim.Adam())
    model_file = tmp_path / "model.safetensors"
    wg.save(model_file, model)
    with pytest.raises(wg.CheckpointError):
        # An SGD file restored into Adam: saved with SGD state first.
        sgd = wg.optim.SGD(0.1)
        params = model.parameters()
        sgd.step(params, [session.ones(p.shape) for p in params])
        wg.save(model_file, model, sgd)
        wg.load(model_file, session, optimizer=wg.optim.Adam())
    assert wg.load(model_file, session).sizes == [2, 3]
