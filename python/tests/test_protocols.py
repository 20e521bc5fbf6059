"""Python's conversions and the array protocols on tensors: one-element conversions as NumPy's, DLPack through a
host copy, the Array API namespace, and in-place operators refused (tensors are immutable)."""

import numpy as np
import pytest

import wgcompute


@pytest.fixture(scope="module")
def session():
    with wgcompute.Session(poison_outputs=True) as s:
        yield s


def test_one_element_tensors_convert_to_python_numbers(session):
    rng = np.random.default_rng()
    value = np.float32(rng.uniform(-5, 5))
    for shape in [(), (1,), (1, 1, 1)]:
        t = session.tensor(np.full(shape, value, np.float32))
        assert float(t) == float(value)
        assert int(t) == int(value)
        assert complex(t) == complex(float(value))
        assert bool(t) == bool(value)


@pytest.mark.parametrize("shape", [(0,), (2,), (3, 1)])
def test_conversions_of_more_or_fewer_than_one_element_raise_as_numpy_does(session, shape):
    t = session.tensor(np.ones(shape, np.float32))
    for convert in (float, int, complex, bool):
        with pytest.raises(TypeError):
            convert(t)


def test_a_float_tensor_is_no_index(session):
    t = session.tensor(np.array([2.0], np.float32))
    with pytest.raises(TypeError, match="no index"):
        [0, 1, 2][t]
    index = session.tensor(np.array([2], np.uint32))
    assert [10, 11, 12][index] == 12


@pytest.mark.parametrize("shape", [(), (1,), (7,), (13, 65), (0, 3)])
def test_numpy_reads_a_tensor_through_dlpack(session, shape):
    rng = np.random.default_rng()
    data = rng.standard_normal(shape).astype(np.float32)
    t = session.tensor(data)
    got = np.from_dlpack(t)
    assert got.shape == data.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, data)
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(wgcompute.InvalidArgumentError, match="copy"):
        t.__dlpack__(copy=False)


def test_a_dlpack_copy_outlives_its_session():
    with wgcompute.Session() as s:
        data = np.arange(5, dtype=np.float32)
        capsule_holder = np.from_dlpack(s.tensor(data))
    np.testing.assert_array_equal(capsule_holder, data)


def test_the_namespace_is_the_array_api_module(session):
    t = session.tensor(np.ones(3, np.float32))
    xp = t.__array_namespace__()
    assert xp is wgcompute.array_api
    assert xp.__array_api_version__ == "2024.12"
    assert t.__array_namespace__(api_version="2024.12") is xp
    with pytest.raises(wgcompute.InvalidArgumentError, match="2024.12"):
        t.__array_namespace__(api_version="2021.12")


IN_PLACE = ["+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>="]


@pytest.mark.parametrize("operator", IN_PLACE)
def test_in_place_operators_are_refused_and_change_nothing(session, operator):
    data = np.arange(1, 5, dtype=np.float32).reshape(2, 2)
    t = session.tensor(data)
    held = t
    namespace = {"t": t, "other": session.tensor(np.ones((2, 2), np.float32))}
    with pytest.raises(TypeError, match="immutable"):
        exec(f"t {operator} other", namespace)
    assert namespace["t"] is held
    np.testing.assert_array_equal(held.numpy(), data)

    v = session.variable(data)
    namespace = {"v": v, "other": 1.0}
    with pytest.raises(TypeError, match="assign"):
        exec(f"v {operator} other", namespace)
    np.testing.assert_array_equal(v.numpy(), data)
