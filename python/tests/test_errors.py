"""The errors: one class each, under wgcompute.Error and the builtin a Python user would catch; raised for
closed and suspended sessions, over-cap requests, bad shapes and bad arguments; and after each of them the
session goes on working. A seeded sweep of mixed calls, some invalid, gets only these errors out."""

import math

import numpy as np
import pytest
from references import BINARY_OPS, REDUCTIONS, UNARY_METHODS, operator_of

import wgcompute


def assert_works(session):
    """The session still computes correctly."""
    a = session.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    got = ((a @ a.T) + 1.0).sum().item()
    assert got == 5 + 14 + 14 + 50 + 4


# --- the classes ---

BUILTINS = {
    "OutOfMemoryError": MemoryError,
    "ShapeError": ValueError,
    "DTypeError": TypeError,
    "InvalidArgumentError": ValueError,
    "ArgumentTypeError": TypeError,
    "ArgumentOverflowError": OverflowError,
    "SessionMismatchError": ValueError,
    "IndexOutOfRangeError": IndexError,
    "SessionClosedError": RuntimeError,
    "SuspendedError": RuntimeError,
    "NotSuspendedError": RuntimeError,
    "DeviceLostError": RuntimeError,
    "AdapterError": RuntimeError,
    "DriverError": RuntimeError,
    "ForkedError": RuntimeError,
    "CheckpointError": ValueError,
    "TuningCacheError": OSError,
    "DivergedError": ArithmeticError,
    "TapeError": RuntimeError,
}


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_each_class_is_a_wgcompute_error_and_its_builtin(name):
    cls = getattr(wgcompute, name)
    assert issubclass(cls, wgcompute.Error)
    assert issubclass(cls, BUILTINS[name])
    assert issubclass(wgcompute.Error, Exception)
    assert name in wgcompute.__all__


def test_every_exported_error_class_is_checked():
    exported = {
        name
        for name in wgcompute.__all__
        if isinstance(getattr(wgcompute, name), type)
        and issubclass(getattr(wgcompute, name), wgcompute.Error)
        and name != "Error"
    }
    assert exported == set(BUILTINS)


def test_every_kind_of_library_error_has_a_class_of_the_package():
    kinds = wgcompute._wgcompute.error_classes()
    assert len(kinds) >= 16
    for kind, class_name in kinds:
        if class_name is None:
            # Interrupted: raised as Python's own KeyboardInterrupt.
            assert kind == "Interrupted"
            continue
        cls = getattr(wgcompute, class_name)
        assert issubclass(cls, wgcompute.Error), kind
        # Each kind its own class, but for the benchmarks' failures, which are the base class.
        assert (cls is wgcompute.Error) == (kind == "Bench"), kind


def test_out_of_memory_carries_its_sizes():
    error = wgcompute.OutOfMemoryError("message")
    assert error.requested is None and error.limit is None and error.by_driver is False


# --- closed sessions ---

SESSION_CALLS = {
    "tensor": lambda s: s.tensor(np.ones(3)),
    "tensor u32": lambda s: s.tensor(np.array([1, 2])),
    "empty": lambda s: s.empty((3,)),
    "zeros": lambda s: s.zeros((3,)),
    "ones": lambda s: s.ones((3,)),
    "full": lambda s: s.full((3,), 2.0),
    "rand": lambda s: s.rand((3,), seed=1),
    "randn": lambda s: s.randn((3,), seed=1),
    "suspend": lambda s: s.suspend(),
    "resume": lambda s: s.resume(),
    "memory_stats": lambda s: s.memory_stats(),
    "device_memory": lambda s: s.device_memory(),
    "trim": lambda s: s.trim(),
    "reset_peak": lambda s: s.reset_peak(),
    "set_memory_limit": lambda s: s.set_memory_limit("64MiB"),
    "sync": lambda s: s.sync(),
    "adapter": lambda s: s.adapter,
    "is_suspended": lambda s: s.is_suspended,
}

TENSOR_CALLS = {
    "numpy": lambda t, u: t.numpy(),
    "asarray": lambda t, u: np.asarray(t),
    "item": lambda t, u: t.sum().item(),
    "tolist": lambda t, u: t.tolist(),
    "exp": lambda t, u: t.exp(),
    "neg": lambda t, u: -t,
    "add scalar": lambda t, u: t + 1.0,
    "scalar sub": lambda t, u: 1.0 - t,
    "add tensor": lambda t, u: t + t,
    "add array": lambda t, u: t + np.ones(3),
    "array add": lambda t, u: np.ones(3) + t,
    "matmul": lambda t, u: t @ t.T,
    "sum": lambda t, u: t.sum(),
    "max axis": lambda t, u: t.max(axis=0),
    "argmax": lambda t, u: t.argmax(),
    "softmax": lambda t, u: t.softmax(),
    "softmax axis 0": lambda t, u: t.softmax(axis=0),
    "log_softmax": lambda t, u: t.log_softmax(),
    "cross entropy": lambda t, u: wgcompute.softmax_cross_entropy(t, t),
    "reshape": lambda t, u: t.reshape(-1),
    "permute": lambda t, u: t.permute(1, 0),
    "T": lambda t, u: t.T,
    "narrow": lambda t, u: t.narrow(0, 0, 1),
    "concat": lambda t, u: wgcompute.concat([t, t]),
    "gather_rows": lambda t, u: t.gather_rows(u),
    "gather_rows array": lambda t, u: t.gather_rows([0]),
    "one_hot": lambda t, u: u.one_hot(3),
    "astype": lambda t, u: t.astype(np.uint32),
    "copy": lambda t, u: t.copy(),
}


@pytest.mark.parametrize("call", SESSION_CALLS)
def test_a_closed_session_raises_session_closed(make_session, adapter, call):
    session = make_session(adapter)
    session.close()
    assert not session.is_open
    with pytest.raises(wgcompute.SessionClosedError) as raised:
        SESSION_CALLS[call](session)
    assert isinstance(raised.value, RuntimeError)


def _session_and_two_tensors(make_session, adapter):
    """A session with the two tensors TENSOR_CALLS take: a float matrix and integer indices."""
    session = make_session(adapter)
    return session, session.ones((2, 3)), session.tensor(np.array([0, 1]))


@pytest.mark.parametrize("call", TENSOR_CALLS)
def test_a_tensor_of_a_closed_session_raises_session_closed(make_session, adapter, call):
    session, t, u = _session_and_two_tensors(make_session, adapter)
    session.close()
    with pytest.raises(wgcompute.SessionClosedError):
        TENSOR_CALLS[call](t, u)
    # What a tensor is stays readable.
    assert t.shape == (2, 3) and t.dtype == np.float32 and len(t) == 2


# --- suspended sessions ---


@pytest.mark.parametrize("call", TENSOR_CALLS)
def test_tensors_of_a_suspended_session_raise_suspended(make_session, adapter, call):
    session, t, u = _session_and_two_tensors(make_session, adapter)
    session.suspend()
    with pytest.raises(wgcompute.SuspendedError):
        TENSOR_CALLS[call](t, u)
    session.resume()
    TENSOR_CALLS[call](t, u)
    assert_works(session)


@pytest.mark.parametrize(
    "call", ["tensor", "tensor u32", "empty", "zeros", "ones", "full", "rand", "randn", "suspend", "memory_stats"]
)
def test_a_suspended_session_refuses_new_work(make_session, adapter, call):
    session = make_session(adapter)
    session.suspend()
    assert session.is_suspended and "suspended" in repr(session)
    with pytest.raises(wgcompute.SuspendedError):
        SESSION_CALLS[call](session)
    session.resume()
    assert not session.is_suspended
    assert_works(session)


def test_resume_brings_tensors_back_bit_for_bit(make_session, adapter, rng):
    session = make_session(adapter)
    x = rng.standard_normal((257, 13)).astype(np.float32)
    ids = rng.integers(0, 2**32, 65, dtype=np.uint64)
    t, u = session.tensor(x), session.tensor(ids)
    report = session.suspend()
    assert report["tensors"] >= 2 and report["host_bytes"] >= x.nbytes + ids.size * 4
    session.resume()
    np.testing.assert_array_equal(t.numpy(), x)
    np.testing.assert_array_equal(u.numpy(), ids.astype(np.uint32))
    with pytest.raises(wgcompute.NotSuspendedError):
        session.resume()
    assert_works(session)


def test_a_session_closes_while_suspended(make_session, adapter):
    session = make_session(adapter)
    t = session.ones((3,))
    session.suspend()
    session.close()
    with pytest.raises(wgcompute.SessionClosedError):
        t.numpy()


# --- memory caps ---


def test_a_request_over_the_cap(make_session, adapter):
    session = make_session(adapter, memory_limit="64MiB")
    with pytest.raises(wgcompute.OutOfMemoryError) as raised:
        session.zeros(((64 << 20) // 4 + 1,))
    error = raised.value
    assert isinstance(error, MemoryError)
    assert error.requested >= 64 << 20 and error.limit == 64 << 20 and error.by_driver is False
    assert error.in_use == 0
    assert_works(session)
    held = session.zeros(((32 << 20) // 4,))
    with pytest.raises(wgcompute.OutOfMemoryError) as raised:
        session.tensor(np.zeros((40 << 20) // 4, dtype=np.float32))
    assert raised.value.in_use >= 32 << 20
    assert held.sum().item() == 0.0
    assert_works(session)


def test_messages_name_methods_as_python_does(make_session, adapter):
    session = make_session(adapter, memory_limit="16MiB")
    with pytest.raises(wgcompute.OutOfMemoryError) as raised:
        session.zeros(((16 << 20) // 4 + 1,))
    assert "Session.trim()" in str(raised.value) and "::" not in str(raised.value), str(raised.value)
    t = session.ones((3,))
    session.suspend()
    with pytest.raises(wgcompute.SuspendedError) as raised:
        t.numpy()
    assert "Session.resume()" in str(raised.value) and "::" not in str(raised.value), str(raised.value)
    session.resume()
    with pytest.raises(wgcompute.NotSuspendedError) as raised:
        session.resume()
    assert "Session.suspend()" in str(raised.value), str(raised.value)


def test_a_cap_is_the_working_set_with_or_without_read_back(make_session, adapter, rng):
    """Tensors dropped while their work is still recorded are reused by the next step's work at once: a loop
    that never reads back runs under the same cap as one that reads every step (W, its gradient and Adam's two
    moments take 3.9 MiB of the 5 MiB cap; 60 steps' gradients kept until a submission would take 60)."""
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    w0 = rng.standard_normal((1000, 256)).astype(np.float32) * 0.01
    peaks, losses = {}, {}
    for read_every_step in (True, False):
        session = make_session(adapter, memory_limit="5MiB", tuning="defaults")
        w = wgcompute.Variable(session.tensor(w0))
        optimizer = wgcompute.optim.Adam(lr=0.01)
        t = session.tensor(x)
        kept = []
        for _ in range(60):
            with wgcompute.GradientTape() as tape:
                loss = (t @ w).tanh().mean()
            optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w], strict=True))
            kept.append(loss.item() if read_every_step else loss)
        losses[read_every_step] = [loss if read_every_step else loss.item() for loss in kept]
        peaks[read_every_step] = session.memory_stats().peak_in_use
    assert peaks[False] <= peaks[True] * 1.05, peaks
    np.testing.assert_array_equal(losses[False], losses[True])


def test_an_op_whose_output_is_over_the_cap(make_session, adapter):
    session = make_session(adapter, memory_limit="16MiB")
    a = session.ones((1024, 1))
    b = session.ones((1, 4096))
    with pytest.raises(wgcompute.OutOfMemoryError):
        a * b
    with pytest.raises(wgcompute.OutOfMemoryError):
        a @ b
    assert_works(session)


def test_a_cap_below_what_is_in_use(make_session, adapter):
    session = make_session(adapter, memory_limit="64MiB")
    held = session.ones((1 << 20,))
    with pytest.raises(wgcompute.OutOfMemoryError):
        session.set_memory_limit(1024)
    assert session.memory_stats().limit == 64 << 20
    session.set_memory_limit("128MiB")
    assert session.memory_stats().limit == 128 << 20
    session.set_memory_limit(None)
    assert session.memory_stats().limit is None
    assert held.sum().item() == 1 << 20
    assert_works(session)


def test_a_buffer_larger_than_the_adapter_allows(make_session, adapter):
    session = make_session(adapter)
    largest = max(device.max_buffer_size for device in wgcompute.devices())
    with pytest.raises(wgcompute.OutOfMemoryError) as raised:
        session.zeros((largest // 4 + 1,))
    assert raised.value.requested > largest
    assert raised.value.limit is not None
    assert_works(session)


# --- shapes ---


@pytest.mark.parametrize(
    "shape",
    [(2**32, 2**32, 2**32), (2**62, 8), (2**62 + 1, 4), (2**64 - 1,), (2**70,), (2**40, 2**40)],
    ids=str,
)
def test_a_shape_whose_element_count_overflows(make_session, adapter, shape):
    session = make_session(adapter)
    for make in (session.zeros, session.ones, session.empty, lambda s: session.rand(s, seed=1)):
        with pytest.raises(wgcompute.ShapeError):
            make(shape)
    with pytest.raises(wgcompute.ShapeError):
        session.ones((4,)).reshape(shape)
    with pytest.raises(wgcompute.ShapeError):
        session.ones((4,)).reshape(*shape, -1)
    assert_works(session)


@pytest.mark.parametrize("shape", [(-1,), (2, -3), (1.5,), ("a",), (True,), (None,)], ids=str)
def test_a_shape_that_is_no_shape(make_session, adapter, shape):
    session = make_session(adapter)
    with pytest.raises(wgcompute.ShapeError):
        session.zeros(shape)
    assert_works(session)


SHAPE_MISTAKES = {
    "matmul inner": lambda s: s.ones((3, 4)) @ s.ones((3, 4)),
    "matmul 1-D": lambda s: s.ones((3,)) @ s.ones((4, 2)),
    "broadcast": lambda s: s.ones((3, 4)) + s.ones((3,)),
    "broadcast array": lambda s: s.ones((3, 4)) * np.ones((2, 4)),
    "axis": lambda s: s.ones((3, 4)).sum(axis=2),
    "negative axis": lambda s: s.ones((3, 4)).max(axis=-3),
    "axis of 0-d": lambda s: s.ones(()).softmax(),
    "reshape": lambda s: s.ones((3, 4)).reshape(5, 3),
    "two -1": lambda s: s.ones((3, 4)).reshape(-1, -1),
    "permute": lambda s: s.ones((3, 4)).permute(0, 0),
    "narrow": lambda s: s.ones((3, 4)).narrow(1, 3, 2),
    "concat": lambda s: wgcompute.concat([s.ones((2, 3)), s.ones((3, 2))]),
    "cross entropy": lambda s: wgcompute.softmax_cross_entropy(s.ones((3, 4)), s.ones((4,))),
    "max of nothing": lambda s: s.zeros((0,)).max(),
    "argmax of nothing": lambda s: s.zeros((0, 3)).argmax(axis=0),
    "item": lambda s: s.ones((2,)).item(),
}


def assert_refused(session, mistake, error, builtin):
    """``mistake(session)`` raises ``error``, which is also the ``builtin`` exception."""
    with pytest.raises(error) as raised:
        mistake(session)
    assert isinstance(raised.value, builtin)


DTYPE_MISTAKES = {
    "u32 exp": lambda s: s.tensor(np.array([1, 2])).exp(),
    "u32 add": lambda s: s.tensor(np.array([1, 2])) + 1.0,
    "u32 + f32": lambda s: s.tensor(np.array([1, 2])) + s.ones((2,)),
    # Integer sums are exact now; the standard defines mean for floating-point dtypes only.
    "u32 mean": lambda s: s.tensor(np.array([1, 2])).mean(),
    "u32 matmul": lambda s: s.tensor(np.ones((2, 2), dtype=np.int32)) @ s.ones((2, 2)),
    "f32 one_hot": lambda s: s.ones((3,)).one_hot(3),
    "f32 indices": lambda s: s.ones((3, 2)).gather_rows(s.ones((1,))),
    "astype float64": lambda s: s.ones((3,)).astype(np.float64),
    "complex array": lambda s: s.tensor(np.ones(3, dtype=complex)),
    "complex operand": lambda s: s.ones((3,)) + np.ones(3, dtype=complex),
    "string array": lambda s: s.tensor(np.array(["a", "b"])),
    "object array": lambda s: s.tensor(np.array([None, 1], dtype=object)),
    "mixed concat": lambda s: wgcompute.concat([s.ones((2,)), s.tensor(np.array([1]))]),
}


ARGUMENT_TYPE_MISTAKES = {
    "float axis": lambda s: s.ones((3,)).sum(axis=0.5),
}


def _mistakes(table, error, builtin):
    return [pytest.param(mistake, error, builtin, id=name) for name, mistake in table.items()]


@pytest.mark.parametrize(
    ("mistake", "error", "builtin"),
    _mistakes(SHAPE_MISTAKES, wgcompute.ShapeError, ValueError)
    + _mistakes(DTYPE_MISTAKES, wgcompute.DTypeError, TypeError)
    + _mistakes(ARGUMENT_TYPE_MISTAKES, wgcompute.ArgumentTypeError, TypeError),
)
def test_shape_and_dtype_mistakes(make_session, adapter, mistake, error, builtin):
    session = make_session(adapter)
    assert_refused(session, mistake, error, builtin)
    assert_works(session)


ARGUMENT_MISTAKES = {
    "negative int": lambda s: s.tensor(np.array([-1, 2])),
    "int past uint32": lambda s: s.tensor(np.array([2**32])),
    "negative seed": lambda s: s.rand((3,), seed=-1),
    "seed past 2**64": lambda s: s.randn((3,), seed=2**64),
    "NaN seed": lambda s: s.rand((3,), seed=math.nan),
    "NaN fraction cap": lambda s: s.set_memory_limit(math.nan),
    "infinite fraction cap": lambda s: s.set_memory_limit(math.inf),
    "NaN string cap": lambda s: s.set_memory_limit("nan"),
    "zero cap": lambda s: s.set_memory_limit(0),
    "a fraction that leaves no byte": lambda s: s.set_memory_limit(1e-320),
    "no classes": lambda s: s.tensor(np.array([1])).one_hot(0),
    "negative classes": lambda s: s.tensor(np.array([1])).one_hot(-1),
    "negative start": lambda s: s.ones((3,)).narrow(0, -1, 1),
    "negative length": lambda s: s.ones((3,)).narrow(0, 0, -1),
    "no tensors to concat": lambda s: wgcompute.concat([]),
    "negative index": lambda s: s.ones((3, 2)).gather_rows([-1]),
}


@pytest.mark.parametrize("limit", [np.int64(2**30), np.uint64(2**30), np.int32(2**29), 2**30])
def test_integer_caps_of_any_kind_are_bytes(make_session, adapter, limit):
    """A NumPy integer is a number of bytes, as a Python int is, never read as a fraction of device memory."""
    session = make_session(adapter, memory_limit=limit)
    assert session.memory_stats().limit == int(limit)
    session.set_memory_limit(np.int64(2**29))
    assert session.memory_stats().limit == 2**29


@pytest.mark.parametrize("mistake", ARGUMENT_MISTAKES)
def test_argument_mistakes(make_session, adapter, mistake):
    session = make_session(adapter, memory_limit="256MiB")
    assert_refused(session, ARGUMENT_MISTAKES[mistake], wgcompute.InvalidArgumentError, ValueError)
    assert session.memory_stats().limit == 256 << 20
    assert_works(session)


def test_tensors_of_two_sessions(make_session, adapter):
    first, second = make_session(adapter), make_session(adapter)
    a, b = first.ones((2, 2)), second.ones((2, 2))
    for mix in (
        lambda: a + b,
        lambda: a @ b,
        lambda: wgcompute.concat([a, b]),
        lambda: a.gather_rows(second.tensor(np.array([0]))),
    ):
        with pytest.raises(wgcompute.SessionMismatchError) as raised:
            mix()
        assert isinstance(raised.value, ValueError)
    assert_works(first)
    assert_works(second)
    # A tensor given to another session's tensor() is copied there.
    assert second.tensor(a).numpy().tolist() == [[1.0, 1.0], [1.0, 1.0]]


# --- opening sessions ---


@pytest.mark.parametrize(
    "limit",
    [
        "abc",
        "0",
        "-1GiB",
        "nan",
        "inf",
        "1.5",
        "100",
        "12 parsecs",
        math.nan,
        math.inf,
        0,
        -5,
        1.5,
        0.0,
        -0.5,
        True,
        2**64,
        [1],
    ],
    ids=repr,
)
def test_bad_memory_limits(adapter, limit):
    with pytest.raises(wgcompute.InvalidArgumentError) as raised:
        wgcompute.Session(memory_limit=limit, adapter=adapter)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize("limit", ["64MiB", "0.5", 0.25, 1 << 26, "1.5GB", "1048576"], ids=repr)
def test_good_memory_limits(adapter, limit):
    with wgcompute.Session(memory_limit=limit, adapter=adapter) as session:
        assert session.memory_stats().limit > 0
        assert_works(session)


@pytest.mark.parametrize("selector", ["no such adapter", 99])
def test_an_adapter_that_is_not_there(selector):
    with pytest.raises(wgcompute.AdapterError) as raised:
        wgcompute.Session(adapter=selector)
    assert isinstance(raised.value, RuntimeError)


@pytest.mark.parametrize("selector", ["", -1, 1.5, True, [0]], ids=repr)
def test_an_adapter_that_is_no_selector(selector):
    with pytest.raises(wgcompute.InvalidArgumentError):
        wgcompute.Session(adapter=selector)


def test_adapters_by_index_and_name():
    for device in wgcompute.devices():
        with wgcompute.Session(adapter=device.index) as session:
            assert session.adapter["backend"] == device.backend
    with wgcompute.Session(adapter="llvmpipe") as session:
        assert "llvmpipe" in session.adapter["name"]


@pytest.mark.parametrize("tuning", ["nope", "", "TUNE!"])
def test_bad_tuning(adapter, tuning):
    with pytest.raises(wgcompute.InvalidArgumentError):
        wgcompute.Session(adapter=adapter, tuning=tuning)


def test_tuning_of_another_type_is_a_type_error(adapter):
    with pytest.raises(TypeError):
        wgcompute.Session(adapter=adapter, tuning=5)


def test_good_tuning(adapter):
    with wgcompute.Session(adapter=adapter, tuning="defaults") as session:
        assert_works(session)


# --- a sweep of mixed calls ---


class Sweep:
    """Random calls, valid and not, on one session; the tensors made are kept (a few dozen) as operands."""

    def __init__(self, session, rng):
        self.session, self.rng = session, rng
        self.pool = [session.ones((3, 4)), session.tensor(np.array([0, 1, 2]))]

    def shape(self):
        rng = self.rng
        if rng.random() < 0.03:
            return [int(rng.choice([-1, 2**40, 2**63, 2**65])), 3]
        return [int(rng.choice([0, 1, 1, 2, 3, 5, 7, 13, 65])) for _ in range(rng.integers(0, 4))]

    def array(self):
        rng, shape = self.rng, self.shape()
        if any(dim < 0 or dim > 1000 for dim in shape):
            return np.zeros(3)
        kind = rng.choice(["f64", "f32", "f16", "int", "negative int", "bool", "complex", "object", "str", "list"])
        values = rng.uniform(-3, 3, shape)
        return {
            "f64": lambda: values,
            "f32": lambda: values.astype(np.float32),
            "f16": lambda: values.astype(np.float16),
            "int": lambda: rng.integers(0, 70, shape),
            "negative int": lambda: rng.integers(-5, 5, shape),
            "bool": lambda: values > 0,
            "complex": lambda: values.astype(complex),
            "object": lambda: values.astype(object),
            "str": lambda: values.astype(str),
            "list": lambda: values.tolist(),
        }[kind]()

    def tensor(self):
        return self.pool[self.rng.integers(len(self.pool))]

    def operand(self):
        choice = self.rng.integers(4)
        if choice == 0:
            return float(self.rng.uniform(-3, 3))
        if choice == 1:
            return self.array()
        return self.tensor()

    def axis(self, tensor):
        if self.rng.random() < 0.3:
            return None
        return int(self.rng.integers(-tensor.ndim - 1, tensor.ndim + 1))

    def binary(self, name, t):
        """A binary row's operator, the tensor on either side."""
        apply = operator_of(name)
        return apply(t, self.operand()) if self.rng.random() < 0.5 else apply(self.operand(), t)

    def step(self):
        rng, s = self.rng, self.session
        t = self.tensor()
        actions = [
            lambda: s.tensor(self.array()),
            lambda: s.zeros(self.shape()),
            lambda: s.full(self.shape(), float(rng.uniform(-5, 5))),
            lambda: s.rand(self.shape(), seed=int(rng.integers(0, 2**63))),
            lambda: s.randn(self.shape(), seed=int(rng.integers(0, 2**63))),
            lambda: getattr(t, str(rng.choice(UNARY_METHODS)))(),
            # One action per binary row; the unary methods share one, as do the reductions.
            *(lambda name=name: self.binary(name, t) for name in BINARY_OPS),
            lambda: t @ self.operand(),
            lambda: getattr(t, str(rng.choice(REDUCTIONS)))(axis=self.axis(t)),
            lambda: getattr(t, str(rng.choice(["argmax", "argmin"])))(axis=self.axis(t)),
            lambda: t.softmax(axis=self.axis(t) or -1),
            lambda: t.log_softmax(axis=self.axis(t) or -1),
            lambda: wgcompute.softmax_cross_entropy(t, self.operand()),
            lambda: t.reshape(*(self.shape() + ([-1] if rng.random() < 0.5 else []))),
            lambda: t.permute([int(axis) for axis in rng.permutation(t.ndim + int(rng.integers(-1, 2)) % 5)]),
            lambda: t.T,
            lambda: t.narrow(self.axis(t) or 0, int(rng.integers(-1, 8)), int(rng.integers(-1, 8))),
            lambda: wgcompute.concat([self.tensor() for _ in range(rng.integers(0, 4))], axis=self.axis(t) or 0),
            lambda: t.gather_rows(self.operand()),
            lambda: t.one_hot(int(rng.integers(-1, 9))),
            lambda: t.astype(str(rng.choice(["float32", "uint32", "float64", "int8"]))),
            lambda: t.item(),
            lambda: t.numpy(),
            lambda: len(t),
            lambda: s.memory_stats(),
        ]
        result = actions[rng.integers(len(actions))]()
        if isinstance(result, wgcompute.Tensor):
            if rng.random() < 0.2:
                result.numpy()
            if result.size < 100_000:
                self.pool.append(result)
            if len(self.pool) > 48:
                self.pool.pop(int(rng.integers(2, len(self.pool))))


def test_a_sweep_of_mixed_calls_gets_only_wgcompute_errors(make_session, adapter, rng):
    session = make_session(adapter, memory_limit="128MiB", poison_outputs=True)
    sweep = Sweep(session, rng)
    outcomes = {}
    for _ in range(3000):
        try:
            sweep.step()
            outcome = "ok"
        except (wgcompute.Error, TypeError, ValueError) as error:
            outcome = type(error).__name__
        except BaseException as error:  # a PanicException is a BaseException; anything else is a bug as well
            pytest.fail(f"a call raised {type(error).__name__}: {error}")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(outcomes)
    # Enough of both kinds for the sweep to mean something.
    assert outcomes["ok"] > 500
    assert sum(count for name, count in outcomes.items() if name != "ok") > 100
    assert_works(session)
    stats = session.memory_stats()
    assert stats.limit == 128 << 20


@pytest.mark.parametrize(
    "limit, says",
    [
        ("0x100000", "'x100000' after the number is no unit"),
        ("0 parsecs", "'parsecs' after the number is no unit"),
        ("GiB", "does not start with a number"),
        ("1.2.3GiB", "'1.2.3' is not a number"),
    ],
)
def test_a_memory_limit_that_is_no_size_says_so_and_names_the_accepted_forms(adapter, limit, says):
    with pytest.raises(wgcompute.InvalidArgumentError, match="could not be parsed as a size") as raised:
        wgcompute.Session(memory_limit=limit, adapter=adapter)
    message = str(raised.value)
    assert says in message and "2GiB" in message and "fraction" in message and "above zero" not in message


# --- messages in the caller's terms ---


def test_clip_of_an_integer_tensor_clips_it_or_names_clip(make_session, adapter):
    session = make_session(adapter)
    integers = session.tensor(np.array([-5, 0, 3, 9], np.int32))
    assert integers.clip(-1, 4).numpy().tolist() == [-1, 0, 3, 4]
    assert wgcompute.clip(integers, min=2).numpy().tolist() == [2, 2, 3, 9]
    assert integers.clip(max=session.tensor(np.array(1, np.int32))).numpy().tolist() == [-5, 0, 1, 1]
    assert integers.clip(-1, 4).dtype == np.int32
    unsigned = session.tensor(np.array([1, 7], np.uint32))
    assert unsigned.clip(2, 5).numpy().tolist() == [2, 5]
    with pytest.raises(wgcompute.DTypeError, match="clip") as raised:
        integers.clip(0.5, 2)
    assert "maximum_scalar" not in str(raised.value)


def test_roll_by_a_huge_shift_rolls_by_its_remainder_as_numpy(make_session, adapter):
    session = make_session(adapter)
    values = np.arange(7, dtype=np.float32)
    x = session.tensor(values)
    for shift in (10**20, -(10**20), 2**64 + 3, 7 * 10**30):
        assert x.roll(shift).numpy().tolist() == np.roll(values, shift).tolist(), shift
    grid = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = wgcompute.roll(session.tensor(grid), (10**20, -(2**70)), axis=(0, 1)).numpy()
    np.testing.assert_array_equal(got, np.roll(grid, (10**20, -(2**70)), axis=(0, 1)))
    assert session.zeros((0,)).roll(10**20).shape == (0,)


def test_a_negative_fit_seed_is_the_packages_refusal(make_session, adapter):
    from wgcompute import keras

    session = make_session(adapter)
    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(2)], session=session)
    model.compile("sgd", "mse")
    x, y = np.ones((4, 2), np.float32), np.zeros((4, 2), np.float32)
    with pytest.raises(wgcompute.InvalidArgumentError, match="seed is a non-negative int or None; got -1"):
        model.fit(x, y, seed=-1, verbose=0)
    with pytest.raises(wgcompute.ArgumentTypeError, match="seed is a non-negative int"):
        model.fit(x, y, seed="7", verbose=0)
    assert model.fit(x, y, seed=np.int64(3), verbose=0).epoch == [0]


def test_a_negative_polynomial_decay_power_is_refused():
    with pytest.raises(wgcompute.InvalidArgumentError, match="power must be ≥ 0; got -1"):
        wgcompute.optim.schedules.PolynomialDecay(0.1, 10, power=-1)
    schedule = wgcompute.optim.schedules.PolynomialDecay(0.1, 10, end_learning_rate=0.01, power=0)
    assert schedule(10) == pytest.approx(0.1)


def test_integer_labels_to_categorical_crossentropy_suggest_the_sparse_loss(make_session, adapter):
    from wgcompute import keras

    session = make_session(adapter)
    y_pred = session.tensor(np.full((3, 4), 0.25, np.float32))
    with pytest.raises(wgcompute.ShapeError, match=r"one-hot targets of the predictions' shape \(3, 4\)") as raised:
        keras.losses.categorical_crossentropy(np.array([0, 1, 3]), y_pred)
    assert "sparse_categorical_crossentropy" in str(raised.value) and "mul" not in str(raised.value)
    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(4)], session=session)
    model.compile("sgd", "categorical_crossentropy")
    with pytest.raises(wgcompute.ShapeError, match="sparse_categorical_crossentropy"):
        model.fit(np.ones((3, 2), np.float32), np.array([0, 1, 3]), verbose=0)
    with pytest.raises(wgcompute.ShapeError, match=r"got targets of shape \(3, 2\)$"):
        keras.losses.categorical_crossentropy(np.zeros((3, 2)), y_pred)


@pytest.mark.parametrize(
    "x_shape, kernel_shape, options, says",
    [
        ((2, 9, 3), (3, 4, 5), {}, r"takes 4 input channels .* x \[batch, width, channels\] of shape \(2, 9, 3\)"),
        ((2, 9, 4), (3, 2, 6), {"groups": 3}, "groups=3 must divide x's 4 channels"),
        ((2, 3, 2), (5, 2, 1), {}, "spans 5 positions, more than x's width 3"),
        ((2, 3, 2), (2, 2, 1), {"dilation": 4}, r"spans 5 positions"),
    ],
)
def test_conv1d_shape_errors_are_in_conv1d_terms(make_session, adapter, x_shape, kernel_shape, options, says):
    session = make_session(adapter)
    x, kernel = session.zeros(x_shape), session.zeros(kernel_shape)
    with pytest.raises(wgcompute.ShapeError, match=says) as raised:
        wgcompute.conv1d(x, kernel, **options)
    message = str(raised.value)
    assert "conv1d" in message and "conv2d" not in message and "4-D" not in message


def test_an_int32_index_out_of_range_in_take_is_named_as_given(make_session, adapter):
    session = make_session(adapter)
    x = session.tensor(np.arange(4, dtype=np.float32))
    for indices in (np.array([0, -5], np.int32), session.tensor(np.array([0, -5], np.int32))):
        with pytest.raises(wgcompute.IndexOutOfRangeError, match="-5") as raised:
            x.take(indices).numpy()
        assert "4294967291" not in str(raised.value)
    # In range, a negative int32 index counts from the end, as NumPy's take does.
    assert x.take(np.array([-1, 0], np.int32)).numpy().tolist() == [3.0, 0.0]


# --- NumPy's functions and the Array API's versions ---


def test_numpy_reductions_of_a_tensor_pass_their_keywords(make_session, adapter):
    session = make_session(adapter)
    values = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    t = session.tensor(values)
    for function in (np.sum, np.mean, np.max, np.min, np.prod, np.std, np.var):
        got = function(t)
        assert isinstance(got, wgcompute.Tensor), function
        np.testing.assert_allclose(float(got), function(values.astype(np.float64)), rtol=1e-6)
        along = function(t, axis=1, keepdims=True)
        np.testing.assert_allclose(along.numpy(), function(values, axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(float(np.std(t, ddof=1)), np.std(values.astype(np.float64), ddof=1), rtol=1e-6)
    assert float(t.sum(dtype=np.float32)) == 21.0
    integers = session.tensor(np.array([1, 2, 4], np.int32))
    assert np.sum(integers, dtype=np.float32).dtype == np.float32
    with pytest.raises(wgcompute.ArgumentTypeError, match="sum cannot write into out="):
        np.sum(t, out=np.empty(()))
    with pytest.raises(wgcompute.DTypeError, match="mean's dtype=.*float64"):
        np.mean(t, dtype=np.float64)
    with pytest.raises(wgcompute.InvalidArgumentError, match="correction or ddof"):
        t.std(correction=1, ddof=2)


@pytest.mark.parametrize("version", [None, "2022.12", "2023.12", "2024.12"])
def test_every_array_api_version_up_to_the_implemented_one_is_served(make_session, adapter, version):
    session = make_session(adapter)
    assert session.ones((2,)).__array_namespace__(api_version=version) is wgcompute.array_api


@pytest.mark.parametrize("version", ["2025.12", "2021.12", "latest", 2024.12])
def test_an_array_api_version_past_the_implemented_one_is_refused(make_session, adapter, version):
    session = make_session(adapter)
    with pytest.raises(wgcompute.InvalidArgumentError, match="2024.12"):
        session.ones((2,)).__array_namespace__(api_version=version)


def test_softmax_over_an_empty_axis_names_the_callers_axis_and_shape(session):
    for op in (wgcompute.softmax, wgcompute.log_softmax):
        with pytest.raises(wgcompute.ShapeError, match=r"along axis 0; got shape \(0, 3\)"):
            op(session.zeros((0, 3)), axis=0)


def test_logsumexp_of_nothing_is_minus_infinity_as_numpy_s(session):
    # log(sum(exp([]))) = log(0): SciPy's logsumexp and NumPy's log of an empty sum agree.
    assert float(wgcompute.logsumexp(session.zeros((0,))).numpy()) == -np.inf
    np.testing.assert_array_equal(wgcompute.logsumexp(session.zeros((2, 0)), axis=1).numpy(), [-np.inf, -np.inf])
    assert wgcompute.logsumexp(session.zeros((0, 2)), axis=1).shape == (0,)
