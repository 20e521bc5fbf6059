"""The Array API namespace: every name of the standard's 2024.12 namespace is either there or listed in
NOT_PROVIDED with why (never both), the package's __all__ names only what it has, once each, and code written
against the namespace (``xp = x.__array_namespace__()``) computes what NumPy does, including the functions only
the namespace defines (creation with ``device=``, reshape, signbit, diff, isdtype, the constants)."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

import wgcompute as wg
from wgcompute import array_api


def test_every_standard_name_is_provided_or_listed_with_why():
    for name in array_api.STANDARD:
        if name in array_api.NOT_PROVIDED:
            assert array_api.NOT_PROVIDED[name], name
            with pytest.raises(AttributeError):
                getattr(array_api, name)
        else:
            getattr(array_api, name)
    assert set(array_api.NOT_PROVIDED) <= set(array_api.STANDARD)
    assert set(array_api.__all__) == set(array_api.STANDARD) - set(array_api.NOT_PROVIDED)


def test_the_package_all_names_what_it_has_once():
    counts = collections.Counter(wg.__all__)
    assert [name for name, count in counts.items() if count > 1] == []
    assert [name for name in wg.__all__ if not hasattr(wg, name)] == []


def test_code_written_against_the_namespace_matches_numpy(session, rng):
    x = rng.uniform(-2, 2, (7, 13)).astype(np.float32)
    t = session.tensor(x)
    xp = t.__array_namespace__()
    assert xp is array_api and xp.__array_api_version__ == "2024.12"
    got = xp.sum(xp.abs(xp.reshape(t, (13, 7))), axis=0)
    np.testing.assert_allclose(got.numpy(), np.abs(x.reshape(13, 7)).sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(xp.diff(t, axis=1).numpy(), np.diff(x, axis=1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(xp.diff(t, axis=0, n=2).numpy(), np.diff(x, axis=0, n=2), rtol=1e-5, atol=1e-5)
    signed = session.tensor(np.array([-0.0, 0.0, -1.5, 2.0, -np.inf], np.float32))
    np.testing.assert_array_equal(xp.signbit(signed).numpy(), np.signbit(signed.numpy()))
    assert xp.zeros((2, 3), device=session).numpy().tolist() == [[0.0] * 3] * 2
    assert xp.ones((3,), dtype=xp.int32, device=session).numpy().tolist() == [1, 1, 1]
    assert xp.full((2,), 2.5, device=session).numpy().tolist() == [2.5, 2.5]
    assert xp.asarray([1.0, 2.0], device=session).numpy().tolist() == [1.0, 2.0]
    assert xp.asarray(t) is t and xp.asarray(t, copy=True) is not t
    assert xp.empty_like(t).shape == t.shape
    assert (xp.e, xp.pi, xp.newaxis) == (math.e, math.pi, None) and math.isinf(xp.inf) and math.isnan(xp.nan)
    assert xp.isdtype(xp.int32, "signed integer") and xp.isdtype(xp.uint32, ("integral", "bool"))
    assert not xp.isdtype(xp.float32, "integral") and xp.isdtype(xp.bool, "bool")


def test_the_namespace_refuses_a_missing_device_and_unknown_kinds(session):
    with pytest.raises(wg.InvalidArgumentError, match="device"):
        array_api.zeros((2,))
    with pytest.raises(wg.InvalidArgumentError, match="kinds"):
        array_api.isdtype(array_api.float32, "floating")
    assert array_api.zeros((1,), device=session).numpy().tolist() == [0.0]


def test_device_and_to_device(make_session, adapter, rng):
    first, second = make_session(adapter), make_session(adapter)
    x = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    t = first.tensor(x)
    assert t.device is first and t.to_device(first) is t
    moved = t.to_device(second)
    assert moved.device is second
    np.testing.assert_array_equal(moved.numpy(), x)
    with pytest.raises(wg.ArgumentTypeError):
        t.to_device("cpu")


def test_full_takes_the_standards_default_dtype_from_its_fill(session):
    # bool → bool, int → int32 (exact past 2^24, where float32 is not), float → float32, as the standard says.
    for fill, dtype in [(True, np.bool_), (-7, np.int32), (2**24 + 1, np.int32), (2.5, np.float32)]:
        got = array_api.full((3, 5), fill, device=session)
        assert got.dtype == np.dtype(dtype), (fill, got.dtype)
        np.testing.assert_array_equal(got.numpy(), np.full((3, 5), fill, dtype=dtype))
    for fill, dtype in [(2**31 - 1, np.int32), (2**32 - 1, np.uint32), (3, np.float32), (0, np.bool_)]:
        got = array_api.full((2,), fill, dtype=dtype, device=session)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got.numpy(), np.full((2,), fill, dtype=dtype))
    for fill, dtype in [(2**31, None), (-1, np.uint32), (2**32, np.uint32)]:
        with pytest.raises(wg.InvalidArgumentError, match="range"):
            array_api.full((2,), fill, dtype=dtype, device=session)
    assert array_api.full((4,), 1.0, device=session).numpy().tolist() == [1.0] * 4


def test_device_places_empty_like_and_astype_results(session, adapter):
    x = session.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    with wg.Session(adapter=adapter) as other:
        moved = array_api.empty_like(x, device=other)
        assert moved.device is other and moved.shape == (2, 3)
        cast = array_api.astype(x, np.int32, device=other)
        assert cast.device is other
        np.testing.assert_array_equal(cast.numpy(), np.arange(6, dtype=np.int32).reshape(2, 3))
    assert array_api.empty_like(x, device=session).device is session
    assert array_api.astype(x, np.int32).device is session


def test_result_type_takes_python_scalars_as_the_standard_promotes_them(session):
    f = session.tensor(np.zeros(3, dtype=np.float32))
    i = session.tensor(np.zeros(3, dtype=np.int32))
    b = session.tensor(np.zeros(3, dtype=np.bool_))
    assert array_api.result_type(f, 1, 2.5) == np.float32
    assert array_api.result_type(i, 3) == np.int32
    assert array_api.result_type(np.uint32, 3) == np.uint32
    assert array_api.result_type(b, True) == np.bool_
    for args in [(i, 2.5), (b, 1), (f, True)]:
        with pytest.raises(wg.DTypeError):
            array_api.result_type(*args)
    with pytest.raises(wg.ArgumentTypeError):
        array_api.result_type(1, 2.5)
