"""Products against float64 NumPy references: ``@`` and matmul with leading axes broadcast on both sides and
1-D operands (as the Array API's matmul), matrix_transpose and ``mT``, vecdot, tensordot and outer, with their
gradients through a GradientTape against the analytic float64 ones; on both backends with poisoned outputs."""

import numpy as np
import pytest

import wgcompute as wg

PRODUCTS = [
    ((2, 3, 4), (2, 4, 5)),
    ((1, 3, 4), (6, 4, 5)),
    ((6, 3, 4), (4, 5)),
    ((2, 1, 3, 4), (5, 4, 7)),
    ((3, 1, 7, 5), (1, 2, 5, 4)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((4,), (3, 4, 5)),
    ((2, 3, 4), (4,)),
    ((7, 13, 8), (7, 8, 65)),
    ((2, 1, 3, 1, 2, 3), (1, 4, 1, 5, 3, 2)),
]


def f64(array):
    return np.asarray(array, dtype=np.float64)


def gradients(session, build, *arrays):
    """The values of build(*tensors) and the gradient of Σ w·build with respect to each operand."""
    tensors = [session.tensor(a) for a in arrays]
    with wg.GradientTape() as tape:
        for t in tensors:
            tape.watch(t)
        result = build(*tensors)
        weights = np.random.default_rng(len(result.shape)).uniform(-1, 1, result.shape).astype(np.float32)
        cost = (result * session.tensor(weights)).sum() if result.shape else result * float(weights)
    return result.numpy(), [g.numpy() for g in tape.gradient(cost, tensors)], weights


def reduce_to(gradient, shape):
    """A broadcast gradient summed back to an operand's shape."""
    while gradient.ndim > len(shape):
        gradient = gradient.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and gradient.shape[axis] != 1:
            gradient = gradient.sum(axis=axis, keepdims=True)
    return gradient


@pytest.mark.parametrize("a_shape, b_shape", PRODUCTS)
def test_matmul_broadcasts_batches_and_takes_vectors(session, rng, a_shape, b_shape):
    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    b = rng.uniform(-1, 1, b_shape).astype(np.float32)
    got, (da, db), w = gradients(session, lambda x, y: x @ y, a, b)
    want = f64(a) @ f64(b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # d(Σ w·(a@b)) by the float64 rules, the vectors promoted and then squeezed back.
    a2 = f64(a)[None, :] if a.ndim == 1 else f64(a)
    b2 = f64(b)[:, None] if b.ndim == 1 else f64(b)
    w2 = f64(w)
    if a.ndim == 1:
        w2 = np.expand_dims(w2, -2 if b.ndim > 1 else -1)
    if b.ndim == 1:
        w2 = np.expand_dims(w2, -1)
    want_da = reduce_to(w2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
    want_db = reduce_to(np.swapaxes(a2, -1, -2) @ w2, b2.shape).reshape(b.shape)
    np.testing.assert_allclose(da, want_da, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, want_db, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wg.matmul(session.tensor(a), b).numpy(), want, rtol=1e-5, atol=1e-5)


def test_matmul_refuses_batches_that_do_not_broadcast(session):
    with pytest.raises(wg.ShapeError):
        session.tensor(np.ones((2, 3, 4), np.float32)) @ np.ones((3, 4, 5), np.float32)


def test_matrix_transpose_and_mT(session, rng):
    x = rng.uniform(-1, 1, (2, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(wg.matrix_transpose(session.tensor(x)).numpy(), np.swapaxes(x, -1, -2))
    np.testing.assert_array_equal(session.tensor(x).mT.numpy(), np.swapaxes(x, -1, -2))
    with pytest.raises(wg.ShapeError):
        wg.matrix_transpose(session.tensor(np.ones(3, np.float32)))


@pytest.mark.parametrize(
    "a_shape, b_shape, axis", [((7,), (7,), -1), ((3, 5), (5,), -1), ((4, 1, 6), (3, 6), -1), ((5, 3), (5, 3), -2)]
)
def test_vecdot(session, rng, a_shape, b_shape, axis):
    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    b = rng.uniform(-1, 1, b_shape).astype(np.float32)
    got, (da, db), w = gradients(session, lambda x, y: wg.vecdot(x, y, axis=axis), a, b)
    want = np.sum(f64(a) * f64(b), axis=axis)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    spread = np.expand_dims(f64(w), axis)
    np.testing.assert_allclose(da, reduce_to(spread * f64(b), a.shape), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, reduce_to(spread * f64(a), b.shape), rtol=1e-5, atol=1e-5)


def test_vecdot_refuses_a_broadcast_contracted_axis(session):
    with pytest.raises(wg.ShapeError):
        wg.vecdot(session.tensor(np.ones((3, 1), np.float32)), np.ones((3, 4), np.float32))


@pytest.mark.parametrize(
    "a_shape, b_shape, axes",
    [
        ((3, 4, 5), (4, 5, 6), 2),
        ((3, 4), (4, 7), 1),
        ((3, 4), (5, 6), 0),
        ((2, 3, 5), (5, 2, 7), ([0, 2], [1, 0])),
        ((4, 3), (3, 4), ([1, 0], [0, 1])),
    ],
)
def test_tensordot(session, rng, a_shape, b_shape, axes):
    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    b = rng.uniform(-1, 1, b_shape).astype(np.float32)
    got, (da, db), w = gradients(session, lambda x, y: wg.tensordot(x, y, axes=axes), a, b)
    want = np.tensordot(f64(a), f64(b), axes=axes)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Σ w·tensordot is linear in each operand: its gradient is the same contraction against w.
    eye_a = np.eye(a.size).reshape(a.shape + a.shape)
    want_da = np.array([np.sum(f64(w) * np.tensordot(e, f64(b), axes=axes)) for e in eye_a.reshape(-1, *a.shape)])
    np.testing.assert_allclose(da.ravel(), want_da, rtol=1e-5, atol=1e-5)
    eye_b = np.eye(b.size).reshape(b.shape + b.shape)
    want_db = np.array([np.sum(f64(w) * np.tensordot(f64(a), e, axes=axes)) for e in eye_b.reshape(-1, *b.shape)])
    np.testing.assert_allclose(db.ravel(), want_db, rtol=1e-5, atol=1e-5)


def test_tensordot_refuses_sizes_that_differ(session):
    with pytest.raises(wg.ShapeError):
        wg.tensordot(session.tensor(np.ones((3, 4), np.float32)), np.ones((5, 4), np.float32), axes=1)


def test_outer(session, rng):
    a = rng.uniform(-1, 1, 7).astype(np.float32)
    b = rng.uniform(-1, 1, 13).astype(np.float32)
    got, (da, db), w = gradients(session, wg.outer, a, b)
    np.testing.assert_allclose(got, np.outer(f64(a), f64(b)), rtol=1e-6)
    np.testing.assert_allclose(da, f64(w) @ f64(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(db, f64(a) @ f64(w), rtol=1e-5, atol=1e-6)
    with pytest.raises(wg.ShapeError):
        wg.outer(session.tensor(np.ones((2, 2), np.float32)), b)


@pytest.mark.parametrize("precision", ["highest", "high", "medium"])
def test_matmul_precision_is_within_its_bound_and_info_says_which_is_in_effect(make_session, adapter, rng, precision):
    """PyTorch's ``set_float32_matmul_precision`` names: each within its documented error bound against float64;
    ``info()`` names the setting asked for and the one in effect, with a note where they differ."""
    session = make_session(adapter, matmul_precision=precision)
    info = session.info()
    assert session.matmul_precision == precision == info["matmul_precision"]
    assert info["adapter"] == session.adapter
    assert (info["matmul_precision_note"] is None) == (info["matmul_precision_in_effect"] == precision)
    assert info["cooperative_matrix"] or info["cooperative_matrix_configurations"] == []
    bound = {"highest": 1e-6, "high": 1e-5, "medium": 2.0**-10}[precision]
    for m, k, n in [(5, 1, 7), (13, 97, 31), (3, 5003, 8)]:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        got = (session.tensor(a) @ session.tensor(b)).numpy()
        want = f64(a) @ f64(b)
        size = np.abs(f64(a)) @ np.abs(f64(b))
        assert np.all(np.abs(got - want) <= bound * size), (m, k, n)


def test_matmul_precision_refuses_an_unknown_name(adapter):
    with pytest.raises(ValueError, match="matmul_precision"):
        wg.Session(adapter=adapter, matmul_precision="low")
    with pytest.raises(wg.InvalidArgumentError):
        wg.Session(adapter=adapter, matmul_precision="float16")
