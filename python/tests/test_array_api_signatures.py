"""The Array API namespace against the standard's reference implementation, array-api-strict (set to 2024.12):
every function of ``wgcompute.array_api.__all__`` (and of ``__array_namespace_info__()``) has the reference's
parameter names, kinds (positional-only, keyword-only) and defaults, so that a call written against the standard
binds the same way here, except for the differences listed in :data:`ALLOWED_DIFFERENCES`, each with why. A
difference not listed fails, and so does a listed one that is gone, so the list stays true. array-api-strict is a
test dependency: without it these tests fail, never skip.

Also what the namespace adds beside the package's functions: ``meshgrid`` against ``numpy.meshgrid``, and the
answers of ``__array_namespace_info__()``."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import wgcompute as wg
from wgcompute import array_api

API_VERSION = "2024.12"

_MATMUL = (
    "the package's matmul is TensorFlow's tf.matmul(a, b, transpose_a=False, transpose_b=False); the standard's "
    "call, two positional operands, binds the same"
)
_NO_LIKE_DEVICE = (
    "not supported: the result is made in x's session (x.device); move it with to_device. Passing device= is a "
    "TypeError, never ignored"
)
_NO_REDUCTION_DTYPE = (
    "not supported: sums and products give their input's dtype (int32 for bool), with no float64 or int64 to "
    "accumulate in; astype converts an input first. Passing dtype= is a TypeError, never ignored"
)

# Differences from the reference a standard call can meet, by function: (why, the differences as
# signature_differences writes them).
ALLOWED_DIFFERENCES: dict[str, tuple[str, frozenset[str]]] = {
    "matmul": (
        _MATMUL,
        frozenset(
            {
                "x1: named a",
                "x1: positional-or-keyword, the standard's positional-only",
                "x2: named b",
                "x2: positional-or-keyword, the standard's positional-only",
                "transpose_a: not the standard's (default False)",
                "transpose_b: not the standard's (default False)",
            }
        ),
    ),
    "concat": (
        "axis may also come second without its name, as it could before the standard made it keyword-only; "
        "concat(arrays, axis=...) binds as the standard's",
        frozenset({"axis: positional-or-keyword, the standard's keyword-only"}),
    ),
    "expand_dims": (
        "axis defaults to 0 (the 2023.12 standard's default); every call the 2024.12 standard allows binds the same",
        frozenset({"axis: default 0, the standard's none"}),
    ),
    "full_like": (_NO_LIKE_DEVICE, frozenset({"device: missing"})),
    "ones_like": (_NO_LIKE_DEVICE, frozenset({"device: missing"})),
    "zeros_like": (_NO_LIKE_DEVICE, frozenset({"device: missing"})),
    "sum": (_NO_REDUCTION_DTYPE, frozenset({"dtype: missing"})),
    "prod": (_NO_REDUCTION_DTYPE, frozenset({"dtype: missing"})),
    "cumulative_sum": (_NO_REDUCTION_DTYPE, frozenset({"dtype: missing"})),
    "cumulative_prod": (_NO_REDUCTION_DTYPE, frozenset({"dtype: missing"})),
}

INFO_METHODS = ("capabilities", "default_device", "default_dtypes", "dtypes", "devices")

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_KIND_NAMES = {
    inspect.Parameter.POSITIONAL_ONLY: "positional-only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional-or-keyword",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.KEYWORD_ONLY: "keyword-only",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


def _reference_default(parameter: inspect.Parameter) -> object:
    # array-api-strict marks "not given" with its own sentinel (astype's and from_dlpack's device=, copy=), where
    # the standard writes None.
    default = parameter.default
    return None if type(default).__name__ == "Undef" else default


def _default(default: object) -> str:
    return "none" if default is inspect.Parameter.empty else repr(default)


def _compare(name: str, ours: inspect.Parameter, reference: inspect.Parameter) -> list[str]:
    found = []
    if ours.name != reference.name:
        found.append(f"{name}: named {ours.name}")
    if ours.kind != reference.kind:
        found.append(f"{name}: {_KIND_NAMES[ours.kind]}, the standard's {_KIND_NAMES[reference.kind]}")
    default = _reference_default(reference)
    if ours.default is not default and ours.default != default:
        found.append(f"{name}: default {_default(ours.default)}, the standard's {_default(default)}")
    return found


def signature_differences(ours: inspect.Signature, reference: inspect.Signature) -> set[str]:
    """How ``ours`` differs from ``reference`` for a caller, one line per difference, each naming the reference's
    parameter: positional parameters paired by position, the others by name; annotations are not compared."""
    ours_params, reference_params = list(ours.parameters.values()), list(reference.parameters.values())
    ours_positional = [p for p in ours_params if p.kind in _POSITIONAL]
    reference_positional = [p for p in reference_params if p.kind in _POSITIONAL]
    ours_rest = {p.name: p for p in ours_params if p.kind not in _POSITIONAL}
    reference_rest = {p.name: p for p in reference_params if p.kind not in _POSITIONAL}
    found: list[str] = []
    for index in range(max(len(ours_positional), len(reference_positional))):
        mine = ours_positional[index] if index < len(ours_positional) else None
        theirs = reference_positional[index] if index < len(reference_positional) else None
        if mine is not None and theirs is not None:
            found += _compare(theirs.name, mine, theirs)
        elif theirs is not None:
            # Taken here as keyword-only, or not at all.
            if theirs.name in ours_rest:
                found += _compare(theirs.name, ours_rest.pop(theirs.name), theirs)
            else:
                found.append(f"{theirs.name}: missing")
        elif mine is not None and mine.name in reference_rest:
            found += _compare(mine.name, mine, reference_rest.pop(mine.name))
        elif mine is not None:
            found.append(f"{mine.name}: not the standard's (default {_default(mine.default)})")
    for name, theirs in reference_rest.items():
        if name in ours_rest:
            found += _compare(name, ours_rest.pop(name), theirs)
        else:
            found.append(f"{name}: missing")
    for name, mine in ours_rest.items():
        found.append(f"{name}: not the standard's ({_KIND_NAMES[mine.kind]}, default {_default(mine.default)})")
    return set(found)


@pytest.fixture(scope="module")
def reference():
    """array-api-strict as the 2024.12 standard; its flags set back after this module's tests."""
    # A test dependency (the `test` extra): missing, this fails rather than skips.
    import array_api_strict

    array_api_strict.set_array_api_strict_flags(api_version=API_VERSION)
    assert array_api_strict.__array_api_version__ == API_VERSION
    yield array_api_strict
    array_api_strict.reset_array_api_strict_flags()


FUNCTIONS = [name for name in array_api.__all__ if inspect.isfunction(getattr(array_api, name))]


def test_the_functions_are_the_namespace_s_callables():
    # Every other name of __all__ is a dtype or a constant, which have no signature to compare.
    others = [getattr(array_api, name) for name in array_api.__all__ if name not in FUNCTIONS]
    assert [o for o in others if not isinstance(o, (np.dtype, float, type(None)))] == []
    assert len(FUNCTIONS) > 100
    assert "meshgrid" in FUNCTIONS and "__array_namespace_info__" in FUNCTIONS


@pytest.mark.parametrize("name", FUNCTIONS)
def test_signature_matches_the_reference(reference, name):
    ours = inspect.signature(getattr(array_api, name))
    theirs = inspect.signature(getattr(reference, name))
    allowed = ALLOWED_DIFFERENCES.get(name, ("", frozenset()))[1]
    found = signature_differences(ours, theirs)
    assert found - allowed == set(), f"{name}{ours} differs from the standard's {name}{theirs}"
    assert allowed - found == set(), f"{name}: listed differences that are gone; take them off ALLOWED_DIFFERENCES"


@pytest.mark.parametrize("method", INFO_METHODS)
def test_info_method_signature_matches_the_reference(reference, method):
    ours = inspect.signature(getattr(array_api.__array_namespace_info__(), method))
    theirs = inspect.signature(getattr(reference.__array_namespace_info__(), method))
    assert signature_differences(ours, theirs) == set(), f"{method}{ours}, the standard's {method}{theirs}"


def test_every_allowed_difference_is_of_a_function_with_a_reason():
    assert set(ALLOWED_DIFFERENCES) <= set(FUNCTIONS)
    for name, (why, differences) in ALLOWED_DIFFERENCES.items():
        assert why and differences, name


def test_the_comparison_sees_each_kind_of_difference():
    def reference(x, /, shape, *, axis=0, device=None): ...

    assert signature_differences(inspect.signature(reference), inspect.signature(reference)) == set()

    def renamed(y, shape, /, *, axis=1, extra=None): ...

    assert signature_differences(inspect.signature(renamed), inspect.signature(reference)) == {
        "x: named y",
        "shape: positional-only, the standard's positional-or-keyword",
        "axis: default 1, the standard's 0",
        "device: missing",
        "extra: not the standard's (keyword-only, default None)",
    }

    def loose(x, /, shape, axis=0, device=None, more=2): ...

    assert signature_differences(inspect.signature(loose), inspect.signature(reference)) == {
        "axis: positional-or-keyword, the standard's keyword-only",
        "device: positional-or-keyword, the standard's keyword-only",
        "more: not the standard's (default 2)",
    }

    def short(x, shape=None, *, device=None): ...

    assert signature_differences(inspect.signature(short), inspect.signature(reference)) == {
        "x: positional-or-keyword, the standard's positional-only",
        "shape: default None, the standard's none",
        "axis: missing",
    }

    def keyword_shape(x, /, *, shape, axis=0, device=None): ...

    assert signature_differences(inspect.signature(keyword_shape), inspect.signature(reference)) == {
        "shape: keyword-only, the standard's positional-or-keyword",
    }


# --- meshgrid ---


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("lengths", [(7,), (1,), (5, 3), (1, 13), (13, 1), (2, 7, 3), (1, 5, 1), (11, 1, 2)])
def test_meshgrid_matches_numpy(session, rng, indexing, lengths):
    vectors = [rng.uniform(-3, 3, n).astype(np.float32) for n in lengths]
    grids = array_api.meshgrid(*(session.tensor(v) for v in vectors), indexing=indexing)
    expected = np.meshgrid(*(v.astype(np.float64) for v in vectors), indexing=indexing)
    assert isinstance(grids, list) and len(grids) == len(lengths)
    for got, want in zip(grids, expected, strict=True):
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_array_equal(got.numpy().astype(np.float64), want)


def test_meshgrid_keeps_the_dtype_and_defaults_to_xy(session, rng):
    vectors = [rng.integers(-100, 100, n).astype(np.int32) for n in (3, 5)]
    x, y = array_api.meshgrid(*(session.tensor(v) for v in vectors))
    want_x, want_y = np.meshgrid(*vectors)
    assert x.dtype == y.dtype == np.int32 and x.shape == (5, 3)
    np.testing.assert_array_equal(x.numpy(), want_x)
    np.testing.assert_array_equal(y.numpy(), want_y)
    assert array_api.meshgrid() == [] and array_api.meshgrid(indexing="ij") == []


def test_meshgrid_passes_gradients(session, rng):
    x = session.tensor(rng.uniform(-1, 1, 3).astype(np.float32))
    y = session.tensor(rng.uniform(-1, 1, 5).astype(np.float32))
    with wg.GradientTape() as tape:
        tape.watch([x, y])
        gx, gy = array_api.meshgrid(x, y)
        loss = array_api.sum(gx) + 2.0 * array_api.sum(gy)
    dx, dy = tape.gradient(loss, [x, y])
    np.testing.assert_allclose(dx.numpy(), np.full(3, 5.0))
    np.testing.assert_allclose(dy.numpy(), np.full(5, 6.0))


def test_meshgrid_refuses_what_the_standard_does_not_define(session):
    a, b = session.tensor(np.arange(3, dtype=np.float32)), session.tensor(np.arange(2, dtype=np.int32))
    with pytest.raises(wg.InvalidArgumentError, match="indexing"):
        array_api.meshgrid(a, indexing="yx")
    with pytest.raises(wg.ShapeError, match="1-D"):
        array_api.meshgrid(a, session.zeros((2, 2)))
    with pytest.raises(wg.DTypeError, match="one dtype"):
        array_api.meshgrid(a, b)


def test_meshgrid_refuses_two_sessions(make_session, adapter):
    first, second = make_session(adapter), make_session(adapter)
    with pytest.raises(wg.SessionMismatchError):
        array_api.meshgrid(first.zeros((2,)), second.zeros((3,)))


# --- __array_namespace_info__ ---


def test_info_answers(session):
    info = array_api.__array_namespace_info__()
    assert info is array_api.__array_namespace_info__()
    # unique_all, unique_counts and unique_inverse are missing, so not every data-dependent shape is there.
    assert info.capabilities() == {"boolean indexing": True, "data-dependent shapes": False, "max dimensions": 8}
    assert info.default_device() is None
    defaults = {"real floating": array_api.float32, "integral": array_api.int32, "indexing": array_api.uint32}
    assert info.default_dtypes() == defaults and info.default_dtypes(device=session) == defaults
    held = {"bool": array_api.bool, "int32": array_api.int32, "uint32": array_api.uint32, "float32": array_api.float32}
    assert info.dtypes() == held and info.dtypes(device=session) == held
    by_kind = {
        "bool": ["bool"],
        "signed integer": ["int32"],
        "unsigned integer": ["uint32"],
        "integral": ["int32", "uint32"],
        "real floating": ["float32"],
        "complex floating": [],
        "numeric": ["int32", "uint32", "float32"],
    }
    for kind, names in by_kind.items():
        assert sorted(info.dtypes(kind=kind)) == sorted(names), kind
        assert all(array_api.isdtype(dtype, kind) for dtype in info.dtypes(kind=kind).values())
    assert sorted(info.dtypes(kind=("bool", "real floating"))) == ["bool", "float32"]
    with pytest.raises(wg.InvalidArgumentError, match="kinds"):
        info.dtypes(kind="floating")
    with pytest.raises(wg.ArgumentTypeError):
        info.dtypes(device="cpu")
    with pytest.raises(wg.ArgumentTypeError):
        info.default_dtypes(device=0)


def test_info_devices_are_the_open_sessions(make_session, adapter):
    info = array_api.__array_namespace_info__()
    first, second = make_session(adapter), make_session(adapter)
    devices = info.devices()
    assert isinstance(devices, list) and all(isinstance(device, wg.Session) for device in devices)
    assert any(d is first for d in devices) and any(d is second for d in devices)
    # Each is what creation functions take as device=.
    assert array_api.zeros((2,), device=first).device is first
    second.close()
    assert not any(d is second for d in info.devices())
    assert any(d is first for d in info.devices())
