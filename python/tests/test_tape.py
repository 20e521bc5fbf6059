"""GradientTape: every recording op's gradient against central finite differences of a float64 numpy reference,
on fresh random inputs at awkward shapes (1, primes, broadcasting), on both backends with poisoned outputs; the
sweep takes every row of the library's op tables, so a new row fails here until it has a reference. Then what a
tape records and what it refuses: ops without a gradient, integer results, labels, uint32 tensors; persistent
and non-persistent tapes; unconnected sources; intermediate sources; recording per thread; nesting."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from references import (
    BINARY,
    BINARY_OPS,
    REDUCE,
    REDUCTIONS,
    SCALAR_FORMS,
    UNARY,
    draw,
    numeric_gradients,
    operator_of,
    scalar_call,
)

import wgcompute as wg
from wgcompute import _ops

# How a user writes each scalar row (the others are methods): ``x + c``, ``c - x``, ...
SCALAR_CALLS = {scalar: scalar_call(first, binary) for scalar, binary, first in SCALAR_FORMS}

UNARY_SHAPES = [(1,), (7,), (3, 5)]
BINARY_SHAPES = [((7,), (7,)), ((3, 5), (5,)), ((3, 1), (1, 5)), ((1,), (3, 5)), ((2, 3, 5), (3, 1))]
REDUCE_CASES = [((1,), None), ((7,), 0), ((3, 5), None), ((3, 5), 0), ((3, 5), -1), ((2, 3, 5), 1)]


def check_gradients(session, rng, reference, build, arrays, which=None, what=""):
    """Records ``build(*tensors)`` on a tape, with the tensors at ``which`` (default: all) watched, weights it by
    random values into a scalar, and checks the tape's gradient of each watched tensor against finite
    differences of ``reference``."""
    which = list(range(len(arrays))) if which is None else which
    tensors = [session.tensor(array) for array in arrays]
    forward = reference(*[array.astype(np.float64) for array in arrays])
    weights = rng.uniform(-1.0, 1.0, np.shape(forward)).astype(np.float32)
    with wg.GradientTape() as tape:
        for position in which:
            tape.watch(tensors[position])
        result = build(*tensors)
        cost = (result * session.tensor(weights)).sum()
    np.testing.assert_allclose(result.numpy(), forward, rtol=2e-5, atol=2e-6, err_msg=f"{what}: forward")
    gradients = tape.gradient(cost, [tensors[position] for position in which])
    wanted = numeric_gradients(reference, arrays, weights.astype(np.float64), which)
    for position, gradient, want in zip(which, gradients, wanted, strict=True):
        assert gradient is not None, f"{what}: no gradient for input {position}"
        got = gradient.numpy()
        assert got.shape == want.shape, f"{what}: gradient of shape {got.shape}, input {want.shape}"
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5 * scale, err_msg=f"{what}: input {position}")


def shape_id(shape):
    return "x".join(map(str, shape)) or "scalar"


# --- the sweep over the op tables ---


@pytest.mark.parametrize("row", _ops.UNARY_ROWS, ids=[row.name for row in _ops.UNARY_ROWS])
@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=shape_id)
def test_every_unary_row_records_its_gradient(session, rng, row, shape):
    name, takes_scalar = row.name, row.takes_scalar
    reference = UNARY[name].reference
    scalar = float(rng.uniform(0.5, 2.0)) if takes_scalar else 0.0
    call = SCALAR_CALLS[name] if takes_scalar else (lambda x, a: getattr(x, name)())
    x = draw(rng, shape, UNARY[name].gradients)
    if name in ("maximum_scalar", "minimum_scalar"):
        # Their kink is at the scalar, which is drawn where x is: keep every element off it by more than a finite
        # difference's step, as "away" keeps relu's off 0 (seed 1120073727 put one within it).
        at = np.float32(scalar)
        x = np.where(np.abs(x - at) < 0.05, at + np.copysign(np.float32(0.05), x - at), x).astype(np.float32)
    check_gradients(
        session,
        rng,
        lambda x: reference(x, np.float64(np.float32(scalar))),
        lambda x: call(x, scalar),
        [x],
        what=name,
    )


@pytest.mark.parametrize("name", BINARY_OPS)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=lambda pair: "_".join(map(shape_id, pair)))
def test_every_binary_row_records_both_gradients_with_broadcasting(session, rng, name, shapes):
    reference, apply = BINARY[name].reference, operator_of(name)
    a, b = draw(rng, shapes[0], BINARY[name].first), draw(rng, shapes[1], BINARY[name].divisor)
    check_gradients(session, rng, reference, apply, [a, b], what=name)
    # The reflected form too, with the tensors swapped in the operator's place.
    check_gradients(session, rng, lambda x, y: reference(y, x), lambda x, y: apply(y, x), [b, a], what=name)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("case", REDUCE_CASES, ids=lambda case: f"{shape_id(case[0])}-axis{case[1]}")
def test_every_reduction_records_its_gradient_or_refuses_by_name(session, rng, name, case):
    shape, axis = case
    x = draw(rng, shape, "away")
    reference = REDUCE[name].reference
    if not REDUCE[name].differentiable:
        variable = session.variable(x)
        with wg.GradientTape():
            with pytest.raises(wg.InvalidArgumentError, match=name):
                getattr(variable, name)(axis=axis)
            # On a tensor nothing watches it runs as it does outside a tape.
            np.testing.assert_allclose(getattr(session.tensor(x), name)(axis=axis).numpy(), reference(x, axis=axis))
        return
    check_gradients(
        session, rng, lambda x: reference(x, axis=axis), lambda x: getattr(x, name)(axis=axis), [x], what=name
    )


# --- the other ops ---


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("mkn", [(1, 1, 1), (3, 5, 2), (7, 1, 3)], ids=lambda mkn: "x".join(map(str, mkn)))
def test_matmul_with_transposes(session, rng, transpose_a, transpose_b, mkn):
    m, k, n = mkn
    a = draw(rng, (k, m) if transpose_a else (m, k))
    b = draw(rng, (n, k) if transpose_b else (k, n))

    def reference(x, y):
        return (x.T if transpose_a else x) @ (y.T if transpose_b else y)

    check_gradients(session, rng, reference, lambda x, y: wg.matmul(x, y, transpose_a, transpose_b), [a, b])
    # The operator and .T, recorded as a permute and a matmul.
    check_gradients(
        session,
        rng,
        reference,
        lambda x, y: (x.T if transpose_a else x) @ (y.T if transpose_b else y),
        [a, b],
    )


def np_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("case", [((1,), 0), ((7,), -1), ((3, 5), 0), ((3, 5), 1), ((2, 3, 5), 1)], ids=str)
def test_softmax_along_any_axis(session, rng, log, case):
    shape, axis = case

    def reference(x):
        return np.log(np_softmax(x, axis)) if log else np_softmax(x, axis)

    check_gradients(
        session, rng, reference, lambda x: x.log_softmax(axis) if log else x.softmax(axis), [draw(rng, shape)]
    )


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (3, 5)], ids=shape_id)
def test_softmax_cross_entropy_gives_the_logits_their_gradient(session, rng, shape):
    # Labels that do not sum to 1: the gradient is the exact one.
    labels = rng.uniform(0.0, 1.0, shape).astype(np.float32)

    def reference(logits):
        return -(labels * np.log(np_softmax(logits, -1))).sum(axis=-1)

    check_gradients(
        session, rng, reference, lambda logits: wg.softmax_cross_entropy(logits, labels), [draw(rng, shape)]
    )


def test_watched_labels_are_refused(session, rng):
    logits, labels = session.variable(draw(rng, (3, 5))), session.variable(rng.uniform(0, 1, (3, 5)))
    with wg.GradientTape(), pytest.raises(wg.InvalidArgumentError, match="labels"):
        wg.softmax_cross_entropy(logits, labels)


def test_gather_rows_sums_the_gradient_of_a_row_picked_twice(session, rng):
    indices = np.array([0, 3, 3, 1, 3], dtype=np.uint32)
    check_gradients(
        session,
        rng,
        lambda table: table[indices],
        lambda table: table.gather_rows(session.tensor(indices)),
        [draw(rng, (5, 3))],
    )


@pytest.mark.parametrize("case", [([(2, 3), (1, 3), (4, 3)], 0), ([(3, 2), (3, 1)], 1), ([(1,), (7,)], 0)], ids=str)
def test_concat(session, rng, case):
    shapes, axis = case
    check_gradients(
        session,
        rng,
        lambda *parts: np.concatenate(parts, axis=axis),
        lambda *parts: wg.concat(parts, axis=axis),
        [draw(rng, shape) for shape in shapes],
    )


@pytest.mark.parametrize("case", [((5, 3), 0, 1, 3), ((5, 3), 1, 2, 1), ((7,), 0, 0, 7)], ids=str)
def test_narrow(session, rng, case):
    shape, axis, start, length = case
    check_gradients(
        session,
        rng,
        lambda x: np.take(x, range(start, start + length), axis=axis),
        lambda x: x.narrow(axis, start, length),
        [draw(rng, shape)],
    )


@pytest.mark.parametrize(
    "case",
    [
        ("permute", lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
        ("transpose", lambda x: x.transpose(0, 2), lambda x: np.swapaxes(x, 0, 2)),
        ("T", lambda x: x.T, lambda x: x.T),
        ("reshape", lambda x: x.reshape(5, -1), lambda x: x.reshape(5, -1)),
        ("flatten", lambda x: x.reshape(-1), lambda x: x.reshape(-1)),
        ("astype", lambda x: x.astype("float32"), lambda x: x.copy()),
        ("copy", lambda x: x.copy(), lambda x: x.copy()),
    ],
    ids=lambda case: case[0],
)
def test_layout_ops(session, rng, case):
    _, build, reference = case
    check_gradients(session, rng, reference, build, [draw(rng, (2, 3, 5))])


# --- what a tape records ---


def test_variables_are_watched_when_used_and_results_are_sources(session, rng):
    w = session.variable(draw(rng, (4, 3)))
    x = session.tensor(draw(rng, (2, 4)))
    c = draw(rng, (2, 3))
    with wg.GradientTape(persistent=True) as tape:
        h = x @ w
        loss = (h * c).sum()
    assert tape.watched_variables() == (w,)
    dh, dw, dx = tape.gradient(loss, [h, w, x])
    np.testing.assert_allclose(dh.numpy(), c, rtol=1e-6)
    np.testing.assert_allclose(dw.numpy(), x.numpy().astype(np.float64).T @ c, rtol=1e-5, atol=1e-6)
    assert dx is None, "x was never watched"
    # One source gives one tensor, a tuple a tuple, a dict a dict.
    assert isinstance(tape.gradient(loss, w), wg.Tensor)
    assert isinstance(tape.gradient(loss, (w, h)), tuple)
    assert set(tape.gradient(loss, {"w": w, "h": h})) == {"w", "h"}


def test_unwatched_ops_are_not_recorded(session, rng):
    w = session.variable(draw(rng, (3,)))
    plain = session.tensor(draw(rng, (3,)))
    with wg.GradientTape(watch_accessed_variables=False) as tape:
        doubled = plain * 2.0
        unwatched = (w * 3.0).sum()
        tape.watch(w)
        watched = (w * 3.0).sum()
    native = tape._native
    assert not native.records(doubled._t) and not native.records(unwatched._t)
    assert native.records(watched._t)
    assert tape.gradient(watched, w).numpy().tolist() == [3.0, 3.0, 3.0]


def test_integer_results_carry_no_gradient_and_are_not_recorded(session, rng):
    w = session.variable(draw(rng, (3, 5)))
    with wg.GradientTape(persistent=True) as tape:
        classes = w.argmax(axis=1)
        smallest = w.argmin()
        rounded = w.astype("uint32")
        loss = w.sum()
    for result in (classes, smallest, rounded):
        assert result.dtype == np.uint32
        assert not tape._native.records(result._t)
        assert tape.gradient(loss, result) is None
    with pytest.raises(wg.DTypeError):
        tape.watch(classes)


def test_unconnected_sources_are_none_or_zeros(session, rng):
    used, unused = session.variable(draw(rng, (2, 3))), session.variable(draw(rng, (4,)))
    for unconnected in ("zero", wg.UnconnectedGradients.ZERO):
        with wg.GradientTape() as tape:
            loss = used.sum()
            unused * 1.0
        d_used, d_unused = tape.gradient(loss, [used, unused], unconnected_gradients=unconnected)
        assert d_used.numpy().tolist() == [[1.0] * 3] * 2
        assert d_unused.shape == (4,) and d_unused.numpy().tolist() == [0.0] * 4
    with wg.GradientTape() as tape:
        loss = used.sum()
    assert tape.gradient(loss, [unused, used])[0] is None
    with wg.GradientTape() as tape:
        loss = used.sum()
    with pytest.raises(wg.InvalidArgumentError):
        tape.gradient(loss, used, unconnected_gradients="bogus")
    # A target the tape never recorded gives None for everything.
    with wg.GradientTape() as tape:
        constant = session.tensor(draw(rng, (3,))).sum()
    assert tape.gradient(constant, [used]) == [None]


def test_output_gradients_weight_a_target_of_several_elements(session, rng):
    x = session.variable(draw(rng, (5,)))
    weights = draw(rng, (5,))
    with wg.GradientTape() as tape:
        y = x * 4.0
    np.testing.assert_allclose(tape.gradient(y, x, output_gradients=weights).numpy(), 4.0 * weights, rtol=1e-6)
    with wg.GradientTape() as tape:
        y = x * 4.0
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.full(5, 4.0))


def test_a_tape_that_is_not_persistent_gives_one_set_of_gradients(session, rng):
    w = session.variable(draw(rng, (3,)))
    with wg.GradientTape() as tape:
        loss = (w * w).sum()
    first = tape.gradient(loss, w)
    np.testing.assert_allclose(first.numpy(), 2 * w.numpy(), rtol=1e-6)
    assert tape._native.is_released, "the tape let go of what it recorded"
    with pytest.raises(wg.TapeError, match="persistent") as raised:
        tape.gradient(loss, w)
    assert isinstance(raised.value, RuntimeError)
    # The results it handed out stay usable.
    assert loss.item() == pytest.approx(float((w.numpy().astype(np.float64) ** 2).sum()), rel=1e-6)


def test_a_persistent_tape_answers_again_until_reset(session, rng):
    w = session.variable(draw(rng, (3,)))
    with wg.GradientTape(persistent=True) as tape:
        squares = (w * w).sum()
        cubes = (w * w * w).sum()
    x = w.numpy().astype(np.float64)
    for _ in range(2):
        np.testing.assert_allclose(tape.gradient(squares, w).numpy(), 2 * x, rtol=1e-6)
        np.testing.assert_allclose(tape.gradient(cubes, w).numpy(), 3 * x**2, rtol=1e-5)
    tape.reset()
    assert tape.gradient(squares, w) is None


def test_stop_recording(session, rng):
    w = session.variable(draw(rng, (3,)))
    with wg.GradientTape() as tape:
        with tape.stop_recording():
            skipped = (w * 2.0).sum()
        kept = (w * 2.0).sum()
    assert not tape._native.records(skipped._t)
    assert tape.gradient(kept, w).numpy().tolist() == [2.0] * 3


def test_tapes_do_not_nest(session, rng):
    w = session.variable(draw(rng, (3,)))
    with wg.GradientTape() as outer:
        with pytest.raises(wg.TapeError, match="nest"):
            with wg.GradientTape():
                pass
        loss = w.sum()
    assert outer.gradient(loss, w) is not None


def test_recording_is_per_thread(session, rng):
    """A tape records only on the thread that entered it; another thread's tape records its own ops."""
    w = session.variable(draw(rng, (3,)))
    results = {}

    def elsewhere():
        results["untaped"] = (w * 5.0).sum()
        with wg.GradientTape() as own:
            loss = (w * 7.0).sum()
        results["own"] = own.gradient(loss, w).numpy()

    with wg.GradientTape(persistent=True) as tape:
        here = (w * 3.0).sum()
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert tape.gradient(here, w).numpy().tolist() == [3.0] * 3
    assert tape.gradient(results["untaped"], w) is None, "the other thread's op was recorded here"
    assert results["own"].tolist() == [7.0] * 3


def test_a_tape_is_left_on_the_thread_that_entered_it(session):
    tape = wg.GradientTape()
    tape.__enter__()
    failures = []

    def leave():
        try:
            tape.__exit__(None, None, None)
        except wg.TapeError as error:
            failures.append(error)

    thread = threading.Thread(target=leave)
    thread.start()
    thread.join()
    assert failures
    tape.__exit__(None, None, None)


def test_a_tape_enters_one_thread_at_a_time(session, rng):
    w = session.variable(draw(rng, (3,)))
    failures = []

    def enter_too():
        try:
            with tape:
                pass
        except wg.TapeError as error:
            failures.append(error)

    with wg.GradientTape() as tape:
        thread = threading.Thread(target=enter_too)
        thread.start()
        thread.join()
        loss = (w * 2.0).sum()
    assert failures and "one thread" in str(failures[0])
    assert tape.gradient(loss, w).numpy().tolist() == [2.0] * 3, "the refused entry left the tape recording here"


def test_a_released_tape_watches_nothing_more(session, rng):
    w = session.variable(draw(rng, (3,)))
    with wg.GradientTape() as tape:
        loss = w.sum()
    tape.gradient(loss, w)
    with pytest.raises(wg.TapeError, match="released"):
        tape.watch(session.tensor(draw(rng, (3,))))


def test_a_gradient_that_releases_the_tape_is_given_once_across_threads(session, rng):
    w = session.variable(draw(rng, (64,)))
    with wg.GradientTape() as tape:
        loss = (w * w).sum()
    outcomes = []

    def ask():
        try:
            outcomes.append(tape.gradient(loss, w))
        except wg.TapeError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    gradients = [outcome for outcome in outcomes if isinstance(outcome, wg.Tensor)]
    assert len(gradients) == 1 and sum(isinstance(o, wg.TapeError) for o in outcomes) == 3
    np.testing.assert_allclose(gradients[0].numpy(), 2 * w.numpy(), rtol=1e-6)


def test_watching_a_uint32_tensor_is_an_error(session):
    with wg.GradientTape() as tape, pytest.raises(wg.DTypeError, match="float32"):
        tape.watch(session.tensor(np.array([1, 2, 3])))


def test_a_mistake_inside_the_block_leaves_the_session_working(session, rng):
    w = session.variable(draw(rng, (3, 4)))
    with wg.GradientTape() as tape:
        with pytest.raises(wg.ShapeError):
            w @ session.tensor(draw(rng, (5, 2)))
        loss = (w @ session.tensor(draw(rng, (4, 2)))).sum()
    assert tape.gradient(loss, w).shape == (3, 4)


# --- variables ---


def test_variables(session, rng):
    data = draw(rng, (2, 3))
    v = session.variable(data, name="kernel")
    assert isinstance(v, wg.Tensor) and v.trainable and v.name == "kernel"
    np.testing.assert_array_equal(v.numpy(), data)
    original = session.tensor(data)
    copied = wg.Variable(original, trainable=False)
    copied.assign(np.zeros((2, 3)))
    np.testing.assert_array_equal(original.numpy(), data)  # a Variable holds its own copy
    assert not copied.trainable and copied.numpy().tolist() == [[0.0] * 3] * 2
    copied.assign_add(np.ones((2, 3))).assign_sub(session.full((2, 3), 0.5))
    assert copied.numpy().tolist() == [[0.5] * 3] * 2
    with pytest.raises(wg.ShapeError):
        v.assign(np.zeros((3, 2)))
    with pytest.raises(wg.InvalidArgumentError, match="session"):
        wg.Variable(data)
    with pytest.raises(wg.DTypeError):
        session.variable(np.array([1, 2], dtype=np.uint32))
    ids = session.variable(np.array([1, 2], dtype=np.uint32), trainable=False)
    assert ids.dtype == np.uint32
    # Results of ops on variables are plain tensors.
    assert type(v * 2.0) is wg.Tensor
    assert "kernel" in repr(v)


def test_read_value_is_recorded_as_a_copy(session, rng):
    """``Variable.read_value()`` is a float op with a gradient (a copy's), so it records like ``Tensor.copy``: the
    gradient flows through it to the variable, and its result is a plain tensor of its own."""
    data, c = draw(rng, (3, 4)), draw(rng, (3, 4))
    w = session.variable(data)
    with wg.GradientTape() as tape:
        value = w.read_value()
        loss = (value * 2.0 * session.tensor(c)).sum()
    assert type(value) is wg.Tensor
    [dw] = tape.gradient(loss, [w])
    assert dw is not None, "read_value() was not recorded: no gradient reached the variable"
    np.testing.assert_array_equal(dw.numpy(), 2.0 * c)
    # A variable that is not trainable records once the tape watches it.
    frozen = session.variable(data, trainable=False)
    with wg.GradientTape() as tape:
        tape.watch(frozen)
        loss = (frozen.read_value() * session.tensor(c)).sum()
    np.testing.assert_array_equal(tape.gradient(loss, frozen).numpy(), c)
    # A copy: assigning the variable afterwards leaves the value read before.
    w.assign(np.zeros((3, 4)))
    np.testing.assert_array_equal(value.numpy(), data)
    ids = session.variable(np.array([1, 2], dtype=np.uint32), trainable=False)
    assert ids.read_value().numpy().tolist() == [1, 2]
