"""Every op family at sizes past the drivers' limits, against NumPy, on both backends, outputs poisoned.

llvmpipe (lavapipe, and Mesa's GL) gives a shader invocation one budget of 65,535 loop iterations over all its
loops and silently cuts them short once it is spent, so each family runs here with 2^16 + 1 along every axis its
kernels loop over (picks of a scatter, a lane of a scan, a row of a softmax, K of a product, a window's taps),
and the families that work in windows of a binding with 2^24 + 1 elements. The first tests are the rows of the
issue that found the silent wrong results: each failed before and must pass now."""

import numpy as np
import pytest

import wgcompute as wg

# One more than the longest loop llvmpipe runs in an invocation.
PAST_LOOP_LIMIT = 2**16 + 1
# More elements than 2^24, past where a float32 index or count stops being exact.
PAST_FLOAT_INDEX = 2**24 + 1


def int32_awkward(rng, size):
    """int32 values with both extremes, -1, 0 and many ties among random values of both signs."""
    info = np.iinfo(np.int32)
    pool = np.array([info.min, info.max, -1, 0, 1, -2, 2], dtype=np.int64)
    values = rng.integers(info.min, info.max, size=size, endpoint=True, dtype=np.int64)
    picked = rng.random(size) < 0.5
    values[picked] = rng.choice(pool, size=int(picked.sum()))
    return values.astype(np.int32)


# --- the rows ---


def test_scatter_add_takes_more_than_65535_indices(session):
    added = session.zeros((2,)).scatter_add(np.zeros(100_000, np.int64), session.ones((100_000,)))
    np.testing.assert_array_equal(added.numpy(), [100_000, 0])


def test_index_update_keeps_the_last_of_more_than_65535_picks(session, rng):
    # Each entry gathers its picks in order (work of entries × picks), so few entries take the many picks; the
    # last pick of each entry lies past the limit.
    entries = 7
    picks = rng.integers(0, entries, PAST_LOOP_LIMIT)
    picks[-entries:] = rng.permutation(entries)
    values = rng.uniform(1.0, 2.0, PAST_LOOP_LIMIT).astype(np.float32)
    put = session.zeros((entries,)).index_update(picks, session.tensor(values))
    want = np.zeros(entries, np.float32)
    want[picks] = values  # NumPy's assignment keeps the last of repeated indices too
    np.testing.assert_array_equal(put.numpy(), want)
    permutation = rng.permutation(4099)
    put = session.zeros((4099,)).index_update(permutation, session.ones((4099,)))
    np.testing.assert_array_equal(put.numpy(), np.ones(4099, np.float32))


@pytest.mark.parametrize("form", ["embedding", "getitem", "take"])
def test_the_gradients_that_scatter_count_every_id(session, rng, form):
    ids = rng.integers(0, 3, 100_000)
    table = session.tensor(rng.standard_normal((3, 2)))
    with wg.GradientTape() as tape:
        tape.watch(table)
        if form == "embedding":
            rows = wg.embedding(session.tensor(ids.astype(np.int32)), table)
        elif form == "getitem":
            rows = table[ids]
        else:
            rows = wg.take(table, ids, axis=0)
        cost = rows.sum()
    (gradient,) = tape.gradient(cost, [table])
    counts = np.bincount(ids, minlength=3).astype(np.float32)
    np.testing.assert_array_equal(gradient.numpy(), np.repeat(counts[:, None], 2, axis=1))


def test_an_embedding_gradient_over_a_token_batch_is_the_sum_of_its_quarters(session, rng):
    vocabulary, width = 50, 8
    tokens = rng.integers(0, vocabulary, (512, 256)).astype(np.int32)
    table = session.tensor(rng.standard_normal((vocabulary, width)))
    upstream = rng.uniform(-1.0, 1.0, (512, 256, width)).astype(np.float32)

    def gradient_of(batch, weights):
        with wg.GradientTape() as tape:
            tape.watch(table)
            cost = (wg.embedding(session.tensor(batch), table) * session.tensor(weights)).sum()
        return tape.gradient(cost, [table])[0].numpy().astype(np.float64)

    whole = gradient_of(tokens, upstream)
    quarters = sum(gradient_of(tokens[q * 128 : (q + 1) * 128], upstream[q * 128 : (q + 1) * 128]) for q in range(4))
    want = np.zeros((vocabulary, width))
    np.add.at(want, tokens.reshape(-1), upstream.reshape(-1, width).astype(np.float64))
    np.testing.assert_allclose(whole, want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(quarters, want, rtol=1e-4, atol=1e-3)


def test_running_sums_cover_long_axes(session):
    total = wg.cumulative_sum(session.ones((100_000,)))
    np.testing.assert_array_equal(total.numpy(), np.arange(1, 100_001, dtype=np.float32))
    wide = wg.cumulative_sum(session.ones((2, 70_000)), axis=1)
    np.testing.assert_array_equal(wide.numpy(), np.tile(np.arange(1, 70_001, dtype=np.float32), (2, 1)))


def test_int32_sorting_ops_follow_numpy(session, rng):
    small = session.tensor(np.array([3, -1, 0, 2], np.int32))
    np.testing.assert_array_equal(wg.sort(small).numpy(), [-1, 0, 2, 3])
    np.testing.assert_array_equal(wg.argsort(small).numpy(), [1, 2, 3, 0])
    info = np.iinfo(np.int32)
    extremes = np.array([info.max, info.min, 0, info.min], np.int32)
    np.testing.assert_array_equal(wg.unique_values(session.tensor(extremes)).numpy(), [info.min, 0, info.max])
    (found,) = wg.nonzero(session.tensor(np.array([0, info.min, 3], np.int32)))
    np.testing.assert_array_equal(found.numpy(), [1, 2])
    for size in [1, 7, 2049, PAST_LOOP_LIMIT]:
        data = int32_awkward(rng, size)
        x = session.tensor(data)
        np.testing.assert_array_equal(wg.sort(x).numpy(), np.sort(data), err_msg=f"sort of {size}")
        np.testing.assert_array_equal(wg.argsort(x).numpy(), np.argsort(data, kind="stable"), err_msg=f"{size}")
        descending = np.argsort(-data.astype(np.int64), kind="stable")
        np.testing.assert_array_equal(wg.argsort(x, descending=True).numpy(), descending, err_msg=f"{size}")
        k = min(size, 5)
        values, indices = wg.top_k(x, k)
        np.testing.assert_array_equal(indices.numpy(), descending[:k], err_msg=f"top_k of {size}")
        np.testing.assert_array_equal(values.numpy(), data[descending[:k]])
        np.testing.assert_array_equal(wg.unique_values(x).numpy(), np.unique(data), err_msg=f"unique of {size}")
        (nonzero,) = wg.nonzero(x)
        np.testing.assert_array_equal(nonzero.numpy(), np.nonzero(data)[0], err_msg=f"nonzero of {size}")
        ordered = np.sort(data)
        needles = int32_awkward(rng, 64)
        for side in ("left", "right"):
            got = wg.searchsorted(session.tensor(ordered), session.tensor(needles), side=side)
            np.testing.assert_array_equal(got.numpy(), np.searchsorted(ordered, needles, side=side))


def test_float_remainder_is_numpy_s_for_every_finite_pair(session, rng):
    pairs = np.array(
        [(1e10, 3), (-1e10, 3), (1e30, 7), (1e20, 1e-20), (-1e-30, 3), (7, -2), (0.0, -3), (3e38, 1e-45)],
        np.float32,
    )
    count = 20_000
    magnitudes = 10.0 ** rng.uniform(-38, 38, (count, 2)) * rng.choice([-1.0, 1.0], (count, 2))
    pairs = np.concatenate([pairs, magnitudes.astype(np.float32)])
    x, y = pairs[:, 0], pairs[:, 1]
    want = np.remainder(x, y)
    got = (session.tensor(x) % session.tensor(y)).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal((session.tensor(x) % 3.0).numpy(), np.remainder(x, np.float32(3.0)))
    np.testing.assert_array_equal((3.0 % session.tensor(y)).numpy(), np.remainder(np.float32(3.0), y))
    finite = np.isfinite(got)
    assert np.all(np.abs(got[finite]) <= np.abs(y[finite]))


def test_cumulative_prod_gradient_is_exact_at_zeros(session):
    x = session.tensor(np.array([2.0, 0.0, 3.0], np.float32))
    with wg.GradientTape() as tape:
        tape.watch(x)
        cost = wg.cumulative_prod(x).sum()
    (gradient,) = tape.gradient(cost, [x])
    np.testing.assert_array_equal(gradient.numpy(), [1.0, 8.0, 0.0])


# --- the sweep: each family with 2^16 + 1 along the axes its kernels loop over ---


def test_elementwise_and_reductions_past_a_float_index(session, rng):
    data = rng.uniform(-1.0, 1.0, PAST_FLOAT_INDEX).astype(np.float32)
    x = session.tensor(data)
    np.testing.assert_array_equal((x * 2.0 + 1.0).numpy(), data * np.float32(2.0) + np.float32(1.0))
    np.testing.assert_allclose(float(x.sum().numpy()), data.astype(np.float64).sum(), rtol=1e-5, atol=1e-2)
    assert int(wg.argmax(x).numpy()) == int(np.argmax(data))
    assert float(wg.max(x).numpy()) == float(data.max())


@pytest.mark.parametrize("shape, axis", [((PAST_LOOP_LIMIT,), 0), ((3, PAST_LOOP_LIMIT), 1), ((PAST_LOOP_LIMIT, 3), 0)])
def test_reductions_and_scans_along_a_long_axis(session, rng, shape, axis):
    data = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    wide = data.astype(np.float64)
    x = session.tensor(data)
    np.testing.assert_allclose(wg.sum(x, axis=axis).numpy(), wide.sum(axis=axis), rtol=1e-5)
    np.testing.assert_allclose(wg.mean(x, axis=axis).numpy(), wide.mean(axis=axis), rtol=1e-5)
    np.testing.assert_array_equal(wg.max(x, axis=axis).numpy(), data.max(axis=axis))
    np.testing.assert_array_equal(wg.argmax(x, axis=axis).numpy(), np.argmax(data, axis=axis))
    np.testing.assert_allclose(wg.cumulative_sum(x, axis=axis).numpy(), np.cumsum(wide, axis=axis), rtol=1e-5)
    signs = np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32)
    np.testing.assert_array_equal(
        wg.cumulative_prod(session.tensor(signs), axis=axis).numpy(), np.cumprod(signs, axis=axis)
    )
    np.testing.assert_array_equal(wg.sort(x, axis=axis).numpy(), np.sort(data, axis=axis))


def test_gradients_of_scans_along_a_long_axis(session, rng):
    data = np.ones(PAST_LOOP_LIMIT + 10, np.float32)
    zero = PAST_LOOP_LIMIT - 2
    data[zero] = 0.0
    x = session.tensor(data)
    with wg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        sums = wg.cumulative_sum(x).sum()
        products = wg.cumulative_prod(x).sum()
    (sum_gradient,) = tape.gradient(sums, [x])
    (product_gradient,) = tape.gradient(products, [x])
    n = data.size
    np.testing.assert_array_equal(sum_gradient.numpy(), np.arange(n, 0, -1, dtype=np.float32))
    want = np.zeros(n, np.float32)
    want[:zero] = zero - np.arange(zero)
    want[zero] = n - zero
    np.testing.assert_array_equal(product_gradient.numpy(), want)


def test_softmax_along_a_long_row(session, rng):
    data = rng.uniform(-8.0, 8.0, (2, PAST_LOOP_LIMIT)).astype(np.float32)
    wide = data.astype(np.float64)
    shifted = np.exp(wide - wide.max(axis=1, keepdims=True))
    want = shifted / shifted.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(wg.softmax(session.tensor(data)).numpy(), want, rtol=1e-4, atol=1e-12)
    np.testing.assert_allclose(wg.log_softmax(session.tensor(data)).numpy(), np.log(want), rtol=1e-5, atol=1e-5)


def test_matmul_with_a_long_inner_axis(session, rng):
    a = rng.uniform(-1.0, 1.0, (3, PAST_LOOP_LIMIT)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (PAST_LOOP_LIMIT, 2)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = wg.matmul(session.tensor(a), session.tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_takes_along_a_long_axis_and_with_many_picks(session, rng):
    data = rng.standard_normal((2, PAST_LOOP_LIMIT)).astype(np.float32)
    picks = rng.integers(-PAST_LOOP_LIMIT, PAST_LOOP_LIMIT, PAST_LOOP_LIMIT)
    x = session.tensor(data)
    np.testing.assert_array_equal(wg.take(x, picks, axis=1).numpy(), np.take(data, picks, axis=1))
    along = rng.integers(0, PAST_LOOP_LIMIT, (2, PAST_LOOP_LIMIT))
    np.testing.assert_array_equal(
        wg.take_along_axis(x, session.tensor(along.astype(np.int32)), axis=1).numpy(),
        np.take_along_axis(data, along, axis=1),
    )
    # A put's gradient: only each index's last pick reaches the output, the last ones past the limit.
    cycle = np.arange(PAST_LOOP_LIMIT) % 3
    values = session.tensor(rng.standard_normal(PAST_LOOP_LIMIT))
    with wg.GradientTape() as tape:
        tape.watch(values)
        cost = (session.zeros((3,)).index_update(cycle, values) * session.tensor([1.0, 2.0, 3.0])).sum()
    (gradient,) = tape.gradient(cost, [values])
    want = np.zeros(PAST_LOOP_LIMIT, np.float32)
    want[-3:] = cycle[-3:] + 1
    np.testing.assert_array_equal(gradient.numpy(), want)


def test_a_convolution_along_a_long_axis_and_its_gradient(session, rng):
    length = PAST_LOOP_LIMIT
    signal = rng.standard_normal((1, length, 2)).astype(np.float32)
    kernel = rng.standard_normal((3, 2, 1)).astype(np.float32)
    x = session.tensor(signal)
    w = session.tensor(kernel)
    with wg.GradientTape() as tape:
        tape.watch(w)
        out = wg.conv1d(x, w)
        cost = out.sum()
    want = sum(signal[0, t : length - 2 + t, :].astype(np.float64) @ kernel[t].astype(np.float64) for t in range(3))
    np.testing.assert_allclose(out.numpy()[0], want, rtol=1e-4, atol=1e-4)
    (gradient,) = tape.gradient(cost, [w])
    want_gradient = np.stack([signal[0, t : length - 2 + t, :].astype(np.float64).sum(axis=0) for t in range(3)])
    np.testing.assert_allclose(gradient.numpy()[:, :, 0], want_gradient, rtol=1e-4, atol=1e-2)


def test_logic_creation_random_and_layout_past_a_float_index(session, rng):
    n = PAST_FLOAT_INDEX
    data = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    x = session.tensor(data)
    np.testing.assert_array_equal(wg.where(x > 0.0, x, -x).numpy(), np.abs(data))
    ramp = wg.arange(n, device=session).numpy()
    assert ramp.shape == (n,) and ramp[-1] == np.float32(n - 1) and ramp[12_345_678] == np.float32(12_345_678)
    draws = session.rand((n,), seed=3).numpy()
    assert draws.min() >= 0.0 and draws.max() < 1.0 and abs(float(draws.mean()) - 0.5) < 1e-3
    np.testing.assert_array_equal(wg.flip(x).numpy(), data[::-1])
    joined = wg.concat([x, session.ones((3,))]).numpy()
    np.testing.assert_array_equal(joined[:n], data)
    np.testing.assert_array_equal(joined[n:], np.ones(3, np.float32))


def test_optimizer_steps_over_more_parameters_than_a_loop_takes(session, rng):
    size = PAST_LOOP_LIMIT
    start = rng.standard_normal(size).astype(np.float32)
    gradient = rng.standard_normal(size).astype(np.float32)
    g = gradient.astype(np.float64)
    w = wg.Variable(start, session=session)
    wg.optim.SGD(learning_rate=0.01).apply_gradients([(session.tensor(gradient), w)])
    np.testing.assert_allclose(w.numpy(), start - 0.01 * g, rtol=1e-6, atol=1e-7)
    # Adam's first step moves every parameter by about the learning rate against its gradient's sign.
    w = wg.Variable(start, session=session)
    wg.optim.Adam(learning_rate=0.01).apply_gradients([(session.tensor(gradient), w)])
    moved = w.numpy().astype(np.float64) - start
    big = np.abs(g) > 1e-2
    np.testing.assert_allclose(moved[big], -0.01 * np.sign(g[big]), rtol=1e-2)
