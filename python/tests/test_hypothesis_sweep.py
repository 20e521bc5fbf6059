"""A Hypothesis sweep over the Python API's arguments: every call given hostile values (None, bools, huge ints,
NumPy scalars, NaN, strings, ragged lists, arrays of odd dtypes, tensors of other sessions, ...) either works or
is refused with a :class:`wgcompute.Error` (each also the builtin a user catches), on both backends; no other
exception, no warning but a ``UserWarning`` of the package's own, no crash and no hang; and after every refusal
the session still computes right.

The sweep is deterministic: each target's examples come from a seed of its name and the backend (Hypothesis's
``derandomize``), so a failure replays as it is. A test still running after ``HANG_SECONDS`` (a call that hangs)
ends the run with every thread's traceback (``faulthandler``)."""

from __future__ import annotations

import copy
import faulthandler
import math
import os
import pickle
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from conftest import open_session
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from references import BINARY_OPS, REDUCTIONS, UNARY_METHODS, operator_of

import wgcompute as wg

# A test (one target's calls, on one backend: seconds) still running after this long hangs: the run ends there,
# printing every thread's stack.
HANG_SECONDS = 120

# Every target is called with each of the FIXED values below (explicit examples, in each position of a target of
# two), then with this many values Hypothesis makes up (and, for two, pairs of any kind).
EXAMPLES = 20
# A fit, even of 2 epochs on 8 samples, costs more than an op: fewer made-up values for those.
FIT_EXAMPLES = 5

MEMORY_LIMIT = "256MiB"
# The estimator's fits run in a session of their own under a small cap, so that a hidden layer of millions of
# units is refused rather than trained for minutes on a CPU adapter.
FIT_MEMORY_LIMIT = "8MiB"
# Sessions the sweep opens take the kernels' defaults: tuning every new shape would cost more than the calls.
TUNING = "defaults"


def assert_works(session):
    """The session still computes right, and no tape was left recording on this thread."""
    a = session.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert ((a @ a.T) + 1.0).sum().item() == 5 + 14 + 14 + 50 + 4
    with wg.GradientTape():
        pass


# --- the context: sessions and files a module's examples share, per backend ---


class Context:
    def __init__(self, adapter, directory):
        self.adapter = adapter
        self.dir = directory
        self.s = open_session(adapter, memory_limit=MEMORY_LIMIT, tuning=TUNING)
        self.fit_s = open_session(adapter, memory_limit=FIT_MEMORY_LIMIT, tuning=TUNING)
        # For operands of another session, and of a closed one.
        self.other = open_session(adapter, tuning=TUNING)
        closed = open_session(adapter, tuning=TUNING)
        self.closed_tensor = closed.ones((2, 3))
        closed.close()
        self.mlp = wg.nn.Mlp(self.s, [2, 3, 2], seed=1)
        self.saved = os.path.join(directory, "tensors.safetensors")
        wg.save(self.saved, {"a": self.f()})
        self.saved_mlp = os.path.join(directory, "mlp.safetensors")
        wg.save(self.saved_mlp, self.mlp, wg.optim.Adam())
        self.fitted = classifier(max_iter=2).fit(X, Y, session=self.fit_s)

    def close(self):
        for session in (self.s, self.fit_s, self.other):
            session.close()

    def f(self):
        """A fresh float32 [2, 3] tensor: 0..5."""
        return self.s.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))

    def u(self):
        """A fresh uint32 [3] tensor: 0, 1, 2."""
        return self.s.tensor(np.array([0, 1, 2], dtype=np.uint32))

    def var(self):
        return self.s.variable(np.ones((2, 3), dtype=np.float32))

    def path(self, value):
        """A str or bytes value as a file name in this module's directory (its separators made '_', so that
        nothing is written outside it); anything else as it is."""
        if isinstance(value, str):
            return os.path.join(self.dir, value.replace(os.sep, "_"))
        if isinstance(value, bytes):
            return os.path.join(os.fsencode(self.dir), value.replace(os.fsencode(os.sep), b"_"))
        return value


@pytest.fixture(scope="module")
def ctx(adapter, tmp_path_factory):
    # Two levels down, so that even '..' names a folder of this run's.
    directory = tmp_path_factory.mktemp(f"sweep-{adapter}") / "a" / "b"
    directory.mkdir(parents=True)
    before = os.getcwd()
    os.chdir(directory)
    context = Context(adapter, str(directory))
    try:
        yield context
    finally:
        context.close()
        os.chdir(before)


@pytest.fixture(autouse=True)
def watchdog():
    # One timer a test: arming and cancelling one for each call would cost more than most calls.
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


# --- hostile values ---


class Hostile:
    """A value to pass (``make`` builds it fresh for each call, in the example's context), shown by ``label``."""

    def __init__(self, label: str, make: Callable[[Context], Any]):
        self.label, self.make = label, make

    def __repr__(self) -> str:
        return self.label


def int_label(value: int) -> str:
    """``2**70``, ``-(10**400)``, ``2**64 - 1``: a huge int as it is written, not in hundreds of digits."""
    size = abs(value)
    if size < 2**20:
        return repr(value)
    for base in (2, 10):
        for offset, suffix in ((0, ""), (1, " - 1")):
            exponent = round(math.log(size + offset, base))
            if exponent >= 20 and base**exponent == size + offset:
                written = f"{base}**{exponent}{suffix}"
                return f"-({written})" if value < 0 else written
    return repr(value) if size < 10**30 else f"an int of {len(str(size))} digits"


def label_of(value: Any) -> str:
    if isinstance(value, type):
        return value.__name__ if value.__module__ == "builtins" else f"np.{value.__name__}"
    if isinstance(value, int) and not isinstance(value, bool):
        return int_label(value)
    if type(value) is tuple:
        return f"({', '.join(map(label_of, value))}{',' if len(value) == 1 else ''})"
    return repr(value)


def plain(value: Any) -> Hostile:
    """An immutable value, passed as it is."""
    return Hostile(label_of(value), lambda c: value)


def fresh(label: str, build: Callable[[], Any]) -> Hostile:
    """A mutable value (a list, an array), built anew for each call."""
    return Hostile(label, lambda c: build())


NAN, INF = math.nan, math.inf

SCALARS = [
    None,
    True,
    False,
    0,
    1,
    2,
    3,
    -1,
    65536,
    2**31,
    2**32,
    2**63,
    2**64 - 1,
    2**64,
    -(2**64),
    2**70,
    -(2**70),
    10**400,
    -(10**400),
    np.int8(-3),
    np.int16(300),
    np.int32(7),
    np.int64(3),
    np.int64(-1),
    np.uint8(255),
    np.uint16(3),
    np.uint32(2**32 - 1),
    np.uint64(2**64 - 1),
    np.float16(1.5),
    np.float32(0.25),
    np.float32(NAN),
    np.float64(INF),
    np.float64(-0.0),
    np.float64(1e308),
    np.bool_(True),
    NAN,
    INF,
    -INF,
    -0.0,
    0.0,
    0.5,
    -2.5,
    1e40,
    1e308,
    5e-324,
    1e-320,
    "",
    "abc",
    "1GiB",
    "nan",
    "-1",
    "vulkan",
    "gl",
    "float32",
    "uint32",
    "adam",
    "constant",
    "tune",
    b"",
    b"abc",
    (),
    (2,),
    (2, 3),
    (3, 2),
    (-1,),
    (0,),
    (2, -1),
    (2**70,),
    (2, 2**64),
    (1.5,),
    (NAN,),
    (None,),
    (True, False),
    (np.int64(2), np.int64(3)),
    ("a",),
    ((1, 2), (3,)),
    frozenset({1, 2}),
    range(3),
    int,
    float,
    np.float32,
    np.uint32,
    complex,
]

CONTAINERS = [
    ("[]", lambda: []),
    ("[3]", lambda: [3]),
    ("[2, 3]", lambda: [2, 3]),
    ("[1.5, -2.0]", lambda: [1.5, -2.0]),
    ("[[1, 2], [3, 4]]", lambda: [[1, 2], [3, 4]]),
    ("[[1, 2], [3]]", lambda: [[1, 2], [3]]),
    ("[[1, 2], 3]", lambda: [[1, 2], 3]),
    ("[[]]", lambda: [[]]),
    ("[None]", lambda: [None]),
    ("[nan, inf]", lambda: [NAN, INF]),
    ("[2**70]", lambda: [2**70]),
    ("[-1, 2]", lambda: [-1, 2]),
    ("['a', 'b']", lambda: ["a", "b"]),
    ("{}", lambda: {}),
    ("{'a': 1}", lambda: {"a": 1}),
    ("{1, 2}", lambda: {1, 2}),
    ("bytearray(b'ab')", lambda: bytearray(b"ab")),
]

ARRAYS = [
    ("np.zeros(3)", lambda: np.zeros(3)),
    ("np.ones((2, 3), float32)", lambda: np.ones((2, 3), dtype=np.float32)),
    ("np.ones((3, 2)).T", lambda: np.ones((3, 2)).T),
    ("np.arange(6).reshape(2, 3)", lambda: np.arange(6, dtype=np.int64).reshape(2, 3)),
    ("np.array([-1, 2])", lambda: np.array([-1, 2], dtype=np.int64)),
    ("np.array([2**64 - 1], uint64)", lambda: np.array([2**64 - 1], dtype=np.uint64)),
    ("np.array([0, 1], uint8)", lambda: np.array([0, 1], dtype=np.uint8)),
    ("np.array([True, False])", lambda: np.array([True, False])),
    ("np.ones(3, complex)", lambda: np.ones(3, dtype=complex)),
    ("np.array([1, None], object)", lambda: np.array([1, None], dtype=object)),
    ("np.array([1.0, 2.0], object)", lambda: np.array([1.0, 2.0], dtype=object)),
    ("np.array(2.0)", lambda: np.array(2.0)),
    ("np.array(3)", lambda: np.array(3, dtype=np.int64)),
    ("np.array([1, 2], float16)", lambda: np.array([1, 2], dtype=np.float16)),
    ("np.array([nan, inf])", lambda: np.array([NAN, INF])),
    ("np.array([1e300])", lambda: np.array([1e300])),
    ("np.zeros(0)", lambda: np.zeros(0)),
    ("np.zeros((0, 3))", lambda: np.zeros((0, 3))),
    ("np.array(['a', 'b'])", lambda: np.array(["a", "b"])),
    ("np.array(['2020-01-01'], datetime64)", lambda: np.array(["2020-01-01"], dtype="datetime64[D]")),
    ("np.ones((2, 2, 2), float32)", lambda: np.ones((2, 2, 2), dtype=np.float32)),
]

WGCOMPUTE = [
    Hostile("tensor f32 [2, 3]", lambda c: c.f()),
    Hostile("tensor f32 [3]", lambda c: c.s.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32))),
    Hostile("tensor f32 0-d", lambda c: c.s.tensor(np.float32(2.0))),
    Hostile("tensor u32 [3]", lambda c: c.u()),
    Hostile("variable f32 [2, 3]", lambda c: c.var()),
    Hostile("tensor of another session", lambda c: c.other.ones((2, 3))),
    Hostile("tensor of a closed session", lambda c: c.closed_tensor),
    Hostile("the session", lambda c: c.s),
    Hostile("an Adam", lambda c: wg.optim.Adam()),
    Hostile("an nn.Mlp", lambda c: c.mlp),
    Hostile("object()", lambda c: object()),
    Hostile("a lambda", lambda c: lambda *a: 1),
]

FIXED = [plain(value) for value in SCALARS] + [fresh(label, build) for label, build in CONTAINERS + ARRAYS] + WGCOMPUTE

# Values Hypothesis makes up: ints of any size, floats of any kind, short strings and bytes, small shapes, and
# tuples of the hostile scalars.
GENERATED = st.one_of(
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.lists(st.integers(-3, 9), max_size=3).map(tuple),
    st.lists(st.sampled_from(SCALARS), min_size=1, max_size=3).map(tuple),
).map(plain)

HOSTILE = st.one_of(st.sampled_from(FIXED), GENERATED)


# --- the data of the estimator's fits ---

X = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [0, 0.5], [1, 0.5], [0.5, 0], [0.5, 1]], dtype=np.float32)
Y = np.array([0, 1, 1, 0, 0, 1, 1, 0])


def classifier(**params):
    base = {"hidden_layer_sizes": (4,), "max_iter": 2, "random_state": 0}
    return wg.MLPClassifier(**{**base, **params})


def fit(c, **params):
    """A fit in the session for fits, with ``params`` over small defaults."""
    return classifier(**params).fit(X, Y, session=c.fit_s)


def fit_own(c, **params):
    """A fit in a session the estimator opens itself (for memory_limit and adapter)."""
    return classifier(**params).fit(X, Y)


def fit_bounded(c, **params):
    """A fit that stops after a few epochs whatever ``max_iter`` it is given (``tol`` no epoch beats), so
    that a huge ``max_iter`` that is not refused costs seconds, not ages."""
    return classifier(tol=1e9, n_iter_no_change=1, **params).fit(X, Y, session=c.fit_s)


# --- the targets ---


@dataclass(frozen=True)
class Target:
    name: str
    call: Callable[..., Any]
    arity: int = 1
    examples: int = EXAMPLES
    # For a target of two values: a valid one for each position, beside which each FIXED value is tried.
    partners: tuple = ()
    # The context's session the call works in, which must still work after a refusal.
    uses: str = "s"

    def __repr__(self) -> str:
        return self.name


def fit_target(name: str, call: Callable[..., Any]) -> Target:
    """A target that fits the estimator: fewer made-up values, in the session for fits."""
    return Target(name, call, examples=FIT_EXAMPLES, uses="fit_s")


# The table's reductions, and the index reductions beside them.
ALL_REDUCTIONS = (*REDUCTIONS, "argmax", "argmin")


def each(*calls):
    """Calls each ``(name, function, *arguments)`` in turn, going on past a wgcompute.Error (the first one is
    raised once all have run); any other exception escapes at once, its call named in a note."""
    refused = None
    for name, function, *arguments in calls:
        try:
            function(*arguments)
        except wg.Error as error:
            refused = refused or error
        except BaseException as error:
            error.add_note(f"raised by {name}")
            raise
    if refused is not None:
        raise refused


def tensor_methods(c, value):
    """A tensor of ``value``, then what a tensor of any shape and dtype answers."""
    tensor = c.s.tensor(value)
    each(
        ("item", tensor.item),
        ("numpy", tensor.numpy),
        ("tolist", tensor.tolist),
        ("len", len, tensor),
        *((name, lambda name=name: getattr(tensor, name)().numpy()) for name in UNARY_METHODS + REDUCTIONS),
        ("argmax", lambda: tensor.argmax().numpy()),
        ("T", lambda: tensor.T.numpy()),
        ("softmax", lambda: tensor.softmax().numpy()),
        ("copy", lambda: tensor.copy().numpy()),
        ("astype float32", lambda: tensor.astype("float32").numpy()),
        ("repr", repr, tensor),
    )


def open_and_close(**options):
    wg.Session(**options).close()


def resume_on(c, adapter):
    session = wg.Session(adapter=c.adapter, tuning=TUNING)
    try:
        session.suspend()
        session.resume(adapter)
        assert_works(session)
    finally:
        session.close()


def set_limit(c, limit):
    try:
        c.s.set_memory_limit(limit)
    finally:
        c.s.set_memory_limit(MEMORY_LIMIT)


def _on_a_tape(c, use, inside, **options):
    """``use(tape, w, loss)``, inside the block of a tape made with ``options`` or after it, where ``loss`` is
    Σ w² of a variable."""
    w = c.var()
    tape = wg.GradientTape(**options)
    with tape:
        loss = (w * w).sum()
        if inside:
            return use(tape, w, loss)
    return use(tape, w, loss)


def with_tape(c, use, **options):
    """``use(tape, w, loss)`` inside a tape made with ``options``, where ``loss`` is Σ w² of a variable."""
    return _on_a_tape(c, use, True, **options)


def after_tape(c, use, **options):
    """``use(tape, w, loss)`` after the tape's block."""
    return _on_a_tape(c, use, False, **options)


def gradient_through(c, value):
    w = c.var()
    with wg.GradientTape() as tape:
        loss = (w * value).sum()
    return tape.gradient(loss, [w])


def step_with(c, make):
    """Makes an optimizer and takes a step with it."""
    optimizer = make()
    w = c.var()
    optimizer.step([w], [c.s.ones((2, 3))])
    return w.numpy()


def optimizer_use(c, use):
    optimizer = wg.optim.Adam()
    w = c.var()
    optimizer.step([w], [c.s.ones((2, 3))])
    return use(optimizer, w)


def set_lr(c, value):
    optimizer = wg.optim.SGD()
    optimizer.learning_rate = value
    return step_with(c, lambda: optimizer)


def load_junk(c, value):
    """A file of ``value``'s bytes (its repr's, for what is not bytes or str) loaded."""
    data = value if isinstance(value, bytes) else str(value if isinstance(value, str) else repr(value)).encode()
    path = os.path.join(c.dir, "junk.safetensors")
    with open(path, "wb") as file:
        file.write(data)
    return wg.load(path, c.s)


def operator_targets():
    for name in BINARY_OPS:
        apply = operator_of(name)
        yield Target(f"t {name} v", lambda c, v, apply=apply: apply(c.f(), v))
        yield Target(f"v {name} t", lambda c, v, apply=apply: apply(v, c.f()))


TARGETS = [
    # Opening sessions.
    Target("Session(memory_limit=v)", lambda c, v: open_and_close(memory_limit=v, adapter=c.adapter)),
    Target("Session(adapter=v)", lambda c, v: open_and_close(adapter=v)),
    Target("Session(tuning=v)", lambda c, v: open_and_close(adapter=c.adapter, tuning=v)),
    Target("Session(poison_outputs=v)", lambda c, v: open_and_close(adapter=c.adapter, poison_outputs=v)),
    Target("s.set_memory_limit(v)", set_limit),
    Target("s.resume(v) after suspend()", resume_on),
    # Session methods.
    Target("s.tensor(v)", lambda c, v: c.s.tensor(v)),
    Target("s.variable(v)", lambda c, v: c.s.variable(v)),
    Target("s.variable(ones, name=v)", lambda c, v: c.s.variable(np.ones(2), name=v)),
    Target("s.variable(ones, trainable=v)", lambda c, v: c.s.variable(np.ones(2), trainable=v)),
    Target("s.zeros(v)", lambda c, v: c.s.zeros(v)),
    Target("s.ones(v)", lambda c, v: c.s.ones(v)),
    Target("s.empty(v)", lambda c, v: c.s.empty(v)),
    Target("s.full(v, 1.0)", lambda c, v: c.s.full(v, 1.0)),
    Target("s.full((2,), v)", lambda c, v: c.s.full((2,), v)),
    Target("s.full(v, w)", lambda c, v, w: c.s.full(v, w), arity=2, partners=((2,), 1.0)),
    Target("s.rand(v)", lambda c, v: c.s.rand(v)),
    Target("s.rand((2,), seed=v)", lambda c, v: c.s.rand((2,), seed=v)),
    Target("s.randn(v, seed=1)", lambda c, v: c.s.randn(v, seed=1)),
    Target("s.randn((2,), seed=v)", lambda c, v: c.s.randn((2,), seed=v)),
    Target("s.randn(v, seed=w)", lambda c, v, w: c.s.randn(v, seed=w), arity=2, partners=((2,), 1)),
    # Tensors made from the value, then used.
    Target("s.tensor(v) then its methods", tensor_methods),
    Target("Tensor(v)", lambda c, v: wg.Tensor(v)),
    # Operators: each binary row's, the tensor on either side.
    *operator_targets(),
    Target("t @ v", lambda c, v: c.f() @ v),
    Target("v @ t", lambda c, v: v @ c.f()),
    Target("u + v", lambda c, v: c.u() + v),
    Target("v op w", lambda c, v, w: (c.s.tensor(v) + w, c.s.tensor(v) * w), arity=2, partners=((1.0, 2.0), 1.5)),
    # Tensor methods.
    Target("t.reshape(v)", lambda c, v: c.f().reshape(v)),
    Target("t.reshape(v, w)", lambda c, v, w: c.f().reshape(v, w), arity=2, partners=(3, 2)),
    Target(
        "t.permute(v) and t.transpose(v)",
        lambda c, v: each(("permute", c.f().permute, v), ("transpose", c.f().transpose, v)),
    ),
    Target("t.permute(v, w)", lambda c, v, w: c.f().permute(v, w), arity=2, partners=(1, 0)),
    Target("t.transpose(v, w)", lambda c, v, w: c.f().transpose(v, w), arity=2, partners=(1, 0)),
    Target("t.<reduction>(axis=v)", lambda c, v: each(*((name, getattr(c.f(), name), v) for name in ALL_REDUCTIONS))),
    Target(
        "t.softmax(axis=v) and t.log_softmax(v)",
        lambda c, v: each(("softmax", c.f().softmax, v), ("log_softmax", c.f().log_softmax, v)),
    ),
    Target("t.narrow(v, 0, 1)", lambda c, v: c.f().narrow(v, 0, 1)),
    Target("t.narrow(1, v, 1)", lambda c, v: c.f().narrow(1, v, 1)),
    Target("t.narrow(1, 0, v)", lambda c, v: c.f().narrow(1, 0, v)),
    Target("t.narrow(1, v, w)", lambda c, v, w: c.f().narrow(1, v, w), arity=2, partners=(0, 1)),
    # (take is gather_rows)
    Target("t.take(v)", lambda c, v: c.f().take(v)),
    Target("u.one_hot(v)", lambda c, v: c.u().one_hot(v)),
    Target(
        "t.astype(v) and u.astype(v)", lambda c, v: each(("t.astype", c.f().astype, v), ("u.astype", c.u().astype, v))
    ),
    # Module functions.
    Target("concat(v)", lambda c, v: wg.concat(v)),
    Target("concat([t, v])", lambda c, v: wg.concat([c.f(), v])),
    Target("concat([v, t])", lambda c, v: wg.concat([v, c.f()])),
    Target("concat([t, t], axis=v)", lambda c, v: wg.concat([c.f(), c.f()], axis=v)),
    Target("matmul(t, v)", lambda c, v: wg.matmul(c.f(), v)),
    Target("matmul(v, t)", lambda c, v: wg.matmul(v, c.f())),
    Target("matmul(t, t, transpose_b=v)", lambda c, v: wg.matmul(c.f(), c.f(), transpose_b=v)),
    Target("softmax_cross_entropy(t, v)", lambda c, v: wg.softmax_cross_entropy(c.f(), v)),
    Target("softmax_cross_entropy(v, t)", lambda c, v: wg.softmax_cross_entropy(v, c.f())),
    # Checkpoints (every path a file in the module's own directory).
    Target("save(path v, {'a': t})", lambda c, v: wg.save(c.path(v), {"a": c.f()})),
    Target("save(path, v)", lambda c, v: wg.save(c.path("out.safetensors"), v)),
    Target("save(path, {'a': v})", lambda c, v: wg.save(c.path("out.safetensors"), {"a": v})),
    Target(
        "save(path, {'a': t}, metadata=v)", lambda c, v: wg.save(c.path("out.safetensors"), {"a": c.f()}, metadata=v)
    ),
    Target(
        "save(path, {'a': t}, metadata={'k': v})",
        lambda c, v: wg.save(c.path("out.safetensors"), {"a": c.f()}, metadata={"k": v}),
    ),
    Target("save(path, mlp, optimizer=v)", lambda c, v: wg.save(c.path("out.safetensors"), c.mlp, optimizer=v)),
    Target("save(path, {'a': t}, v)", lambda c, v: wg.save(c.path("out.safetensors"), {"a": c.f()}, v)),
    Target("load(path v, s)", lambda c, v: wg.load(c.path(v), c.s)),
    Target("load(saved, v)", lambda c, v: wg.load(c.saved, v)),
    Target("load(saved mlp, s, optimizer=v)", lambda c, v: wg.load(c.saved_mlp, c.s, optimizer=v)),
    Target("load(a file of v's bytes, s)", load_junk),
    # Layers.
    Target("nn.Linear(s, v, 3)", lambda c, v: wg.nn.Linear(c.s, v, 3)),
    Target("nn.Linear(s, 2, v)", lambda c, v: wg.nn.Linear(c.s, 2, v)),
    Target("nn.Linear(s, 2, 3, bias=v)", lambda c, v: wg.nn.Linear(c.s, 2, 3, bias=v)),
    Target("nn.Linear(s, 2, 3, seed=v)", lambda c, v: wg.nn.Linear(c.s, 2, 3, seed=v)),
    Target("nn.Linear(v, 2, 3)", lambda c, v: wg.nn.Linear(v, 2, 3)),
    Target("nn.Linear(s, 3, 2)(v)", lambda c, v: wg.nn.Linear(c.s, 3, 2, seed=1)(v)),
    Target("nn.Mlp(s, v)", lambda c, v: wg.nn.Mlp(c.s, v)),
    Target("nn.Mlp(s, [2, v, 2])", lambda c, v: wg.nn.Mlp(c.s, [2, v, 2])),
    Target("nn.Mlp(s, 2, v, 2)", lambda c, v: wg.nn.Mlp(c.s, 2, v, 2)),
    Target("nn.Mlp(s, v, [3], w)", lambda c, v, w: wg.nn.Mlp(c.s, v, [3], w), arity=2, partners=(2, 2)),
    Target("nn.Mlp(s, [2, 3, 2], seed=v)", lambda c, v: wg.nn.Mlp(c.s, [2, 3, 2], seed=v)),
    Target("mlp(v)", lambda c, v: c.mlp(v)),
    # Variables.
    Target("Variable(v, session=s)", lambda c, v: wg.Variable(v, session=c.s)),
    Target("Variable(t, session=v)", lambda c, v: wg.Variable(c.f(), session=v)),
    Target("Variable(ones, session=s, trainable=v)", lambda c, v: wg.Variable(np.ones(2), session=c.s, trainable=v)),
    Target("var.assign(v)", lambda c, v: c.var().assign(v)),
    Target("var.assign_add(v)", lambda c, v: c.var().assign_add(v)),
    Target("var.assign_sub(v)", lambda c, v: c.var().assign_sub(v)),
    # Optimizers.
    Target("optim.Adam(lr=v)", lambda c, v: step_with(c, lambda: wg.optim.Adam(lr=v))),
    Target("optim.Adam(beta1=v)", lambda c, v: step_with(c, lambda: wg.optim.Adam(beta1=v))),
    Target("optim.Adam(beta2=v)", lambda c, v: step_with(c, lambda: wg.optim.Adam(beta2=v))),
    Target("optim.Adam(eps=v)", lambda c, v: step_with(c, lambda: wg.optim.Adam(eps=v))),
    Target("optim.Adam(learning_rate=v)", lambda c, v: step_with(c, lambda: wg.optim.Adam(learning_rate=v))),
    Target(
        "optim.Adam(lr=v, learning_rate=w)",
        lambda c, v, w: step_with(c, lambda: wg.optim.Adam(lr=v, learning_rate=w)),
        arity=2,
        partners=(0.001, 0.01),
    ),
    Target("optim.AdamW(lr=v)", lambda c, v: step_with(c, lambda: wg.optim.AdamW(lr=v))),
    Target("optim.AdamW(weight_decay=v)", lambda c, v: step_with(c, lambda: wg.optim.AdamW(weight_decay=v))),
    Target("optim.SGD(lr=v)", lambda c, v: step_with(c, lambda: wg.optim.SGD(lr=v))),
    Target("optim.SGD(momentum=v)", lambda c, v: step_with(c, lambda: wg.optim.SGD(momentum=v))),
    Target("optim.SGD(nesterov=v)", lambda c, v: step_with(c, lambda: wg.optim.SGD(momentum=0.5, nesterov=v))),
    Target("optim.Adam(weight_decay=v)", lambda c, v: step_with(c, lambda: wg.optim.Adam(weight_decay=v))),
    Target("optim.RMSprop(rho=v)", lambda c, v: step_with(c, lambda: wg.optim.RMSprop(rho=v))),
    Target("optim.Lion(weight_decay=v)", lambda c, v: step_with(c, lambda: wg.optim.Lion(weight_decay=v))),
    Target("optim.Adam(clipnorm=v)", lambda c, v: step_with(c, lambda: wg.optim.Adam(clipnorm=v))),
    Target(
        "keras.optimizers.Adam(learning_rate=v)",
        lambda c, v: step_with(c, lambda: wg.keras.optimizers.Adam(learning_rate=v)),
    ),
    Target(
        "keras.optimizers.AdamW(weight_decay=v)",
        lambda c, v: step_with(c, lambda: wg.keras.optimizers.AdamW(weight_decay=v)),
    ),
    Target("keras.optimizers.Adam(name=v)", lambda c, v: step_with(c, lambda: wg.keras.optimizers.Adam(name=v))),
    Target("keras.initializers.get(v)", lambda c, v: wg.keras.initializers.get(v).draw(c.s, (2, 3), 1).numpy()),
    Target(
        "keras.initializers.VarianceScaling(scale=v)",
        lambda c, v: wg.keras.initializers.VarianceScaling(scale=v).draw(c.s, (2, 3), 1).numpy(),
    ),
    Target(
        "keras.initializers.RandomNormal(seed=v)",
        lambda c, v: wg.keras.initializers.RandomNormal(seed=v).draw(c.s, (2, 3), 1).numpy(),
    ),
    Target(
        "keras.layers.Dense(3, kernel_initializer=v)(x)",
        lambda c, v: wg.keras.layers.Dense(3, kernel_initializer=v)(c.f()).numpy(),
    ),
    Target("keras.utils.to_categorical(v)", lambda c, v: wg.keras.utils.to_categorical(v)),
    Target("keras.utils.to_categorical(y, num_classes=v)", lambda c, v: wg.keras.utils.to_categorical([0, 1], v)),
    Target("optimizer.learning_rate = v", set_lr),
    Target("optimizer.step(v, [g])", lambda c, v: optimizer_use(c, lambda o, w: o.step(v, [c.s.ones((2, 3))]))),
    Target("optimizer.step([w], v)", lambda c, v: optimizer_use(c, lambda o, w: o.step([w], v))),
    Target("optimizer.step([w], [v])", lambda c, v: optimizer_use(c, lambda o, w: o.step([w], [v]))),
    Target("optimizer.step([v], [g])", lambda c, v: optimizer_use(c, lambda o, w: o.step([v], [c.s.ones((2, 3))]))),
    Target("optimizer.apply_gradients(v)", lambda c, v: optimizer_use(c, lambda o, w: o.apply_gradients(v))),
    Target(
        "optimizer.apply_gradients([(v, w)])", lambda c, v: optimizer_use(c, lambda o, w: o.apply_gradients([(v, w)]))
    ),
    # Gradient tapes.
    Target(
        "GradientTape(persistent=v)",
        lambda c, v: after_tape(c, lambda tape, w, loss: tape.gradient(loss, [w]), persistent=v),
    ),
    Target(
        "GradientTape(watch_accessed_variables=v)",
        lambda c, v: after_tape(c, lambda tape, w, loss: tape.gradient(loss, [w]), watch_accessed_variables=v),
    ),
    Target("tape.watch(v)", lambda c, v: with_tape(c, lambda tape, w, loss: tape.watch(v))),
    Target("(w * v).sum() under a tape, then gradient", lambda c, v: gradient_through(c, v)),
    Target("tape.gradient(v, [w])", lambda c, v: after_tape(c, lambda tape, w, loss: tape.gradient(v, [w]))),
    Target("tape.gradient(loss, v)", lambda c, v: after_tape(c, lambda tape, w, loss: tape.gradient(loss, v))),
    Target(
        "tape.gradient(loss, [w], output_gradients=v)",
        lambda c, v: after_tape(c, lambda tape, w, loss: tape.gradient(loss, [w], output_gradients=v)),
    ),
    Target(
        "tape.gradient(loss, [w], unconnected_gradients=v)",
        lambda c, v: after_tape(c, lambda tape, w, loss: tape.gradient(loss, [w], unconnected_gradients=v)),
    ),
    # The estimator: each parameter, then fit's and predict's arguments.
    *[
        fit_target(f"MLPClassifier({name}=v).fit", lambda c, v, name=name: fit(c, **{name: v}))
        for name in (
            "hidden_layer_sizes",
            "solver",
            "batch_size",
            "learning_rate_init",
            "random_state",
            "tol",
            "verbose",
            "momentum",
            "early_stopping",
            "validation_fraction",
            "n_iter_no_change",
            "standardize",
            "learning_rate_schedule",
        )
    ],
    fit_target("MLPClassifier(max_iter=v).fit", lambda c, v: fit_bounded(c, max_iter=v)),
    fit_target(
        "MLPClassifier(early_stopping=True, validation_fraction=v).fit",
        lambda c, v: fit(c, early_stopping=True, validation_fraction=v),
    ),
    fit_target(
        "MLPClassifier(early_stopping=True, n_iter_no_change=v).fit",
        lambda c, v: fit(c, early_stopping=True, n_iter_no_change=v),
    ),
    fit_target("MLPClassifier(memory_limit=v).fit", lambda c, v: fit_own(c, memory_limit=v, adapter=c.adapter)),
    fit_target("MLPClassifier(adapter=v).fit", lambda c, v: fit_own(c, adapter=v)),
    fit_target("MLPClassifier(device=v).fit", lambda c, v: fit_own(c, device=v)),
    fit_target("MLPClassifier().fit(v, y)", lambda c, v: classifier().fit(v, Y, session=c.fit_s)),
    fit_target("MLPClassifier().fit(X, v)", lambda c, v: classifier().fit(X, v, session=c.fit_s)),
    fit_target("MLPClassifier().fit(X, y, session=v)", lambda c, v: classifier().fit(X, Y, session=v)),
    Target("fitted.predict(v)", lambda c, v: c.fitted.predict(v, session=c.fit_s), uses="fit_s"),
    Target("fitted.predict_proba(X, session=v)", lambda c, v: c.fitted.predict_proba(X, session=v), uses="fit_s"),
]


assert len({target.name for target in TARGETS}) == len(TARGETS)
assert all(len(target.partners) == (target.arity if target.arity > 1 else 0) for target in TARGETS)


# --- the property ---


def describe(error: BaseException) -> str:
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    notes = "".join(f" ({note})" for note in getattr(error, "__notes__", ()))
    return f"{name}: {error}{notes}"


# An operator whose operand is of no type a tensor takes returns NotImplemented, so that the other operand's type
# may answer (as numpy's arrays do); when neither does, Python itself raises its TypeError. That refusal is the
# language's protocol, not the package's, and keeping it lets other types define ops with tensors.
OPERATOR_REFUSALS = ("unsupported operand type", "can only concatenate", "can't concat", "can't multiply sequence")


def _the_languages_operator_refusal(error: BaseException) -> bool:
    return type(error) is TypeError and str(error).startswith(OPERATOR_REFUSALS)


def check(session: wg.Session, call: str, run: Callable[[], Any]) -> None:
    """Runs ``run``: it works or raises a wgcompute.Error, warns nothing but a UserWarning, and after a refusal
    ``session`` still computes right."""
    refusal = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # a PanicException is a BaseException
            if _the_languages_operator_refusal(error):
                return
            if not isinstance(error, wg.Error):
                raise AssertionError(f"{call} raised {describe(error)}") from error
            refusal = error
    for warning in caught:
        # The package's own warnings (a batch clipped, a column-vector y) are UserWarnings; any other (numpy's
        # overflow in a conversion, a deprecation) is a failure, as conftest makes warnings everywhere.
        if not issubclass(warning.category, UserWarning):
            raise AssertionError(f"{call} warned {warning.category.__name__}: {warning.message}")
    if refusal is not None:
        try:
            assert_works(session)
        except BaseException as error:
            raise AssertionError(f"after {call} was refused ({describe(refusal)}) the session fails") from error


@pytest.mark.parametrize("target", TARGETS, ids=repr)
def test_hostile_arguments_get_wgcompute_errors_only(ctx, target):
    def call(*hostiles):
        values = [hostile.make(ctx) for hostile in hostiles]
        text = f"{target.name} with {', '.join(f'{n}={h!r}' for n, h in zip('vw', hostiles, strict=False))}"
        check(getattr(ctx, target.uses), text, lambda: target.call(ctx, *values))

    def one_value(v):
        call(v)

    def two_values(v, w):
        call(v, w)

    if target.arity == 1:
        explicit = [{"v": hostile} for hostile in FIXED]
        sweep = given(v=GENERATED)(one_value)
    else:
        first, second = (plain(value) for value in target.partners)
        explicit = [{"v": hostile, "w": second} for hostile in FIXED] + [{"v": first, "w": h} for h in FIXED]
        sweep = given(v=HOSTILE, w=HOSTILE)(two_values)
    for arguments in reversed(explicit):
        sweep = example(**arguments)(sweep)
    sweep = settings(
        max_examples=target.examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )(sweep)
    # Each target's made-up values from its own seed (derandomize alone would give every target the same).
    seed(zlib.crc32(f"{target.name} on {ctx.adapter}".encode()))(sweep)()


# --- copies and pickles ---

OBJECTS = {
    "Session": lambda c: c.s,
    "Tensor": lambda c: c.f(),
    "uint32 Tensor": lambda c: c.u(),
    "Variable": lambda c: c.var(),
    "GradientTape": lambda c: wg.GradientTape(),
    "Adam": lambda c: wg.optim.Adam(),
    "nn.Linear": lambda c: wg.nn.Linear(c.s, 2, 3, seed=1),
    "nn.Mlp": lambda c: c.mlp,
    "MemoryStats": lambda c: c.s.memory_stats(),
}

COPIES = {
    "pickle.dumps": pickle.dumps,
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("what", OBJECTS)
def test_copies_and_pickles_work_or_get_wgcompute_errors(ctx, what, how):
    """A copy or a pickle works or is refused with a wgcompute.Error; a pickle refused is also the TypeError
    pickle's users catch, and for a tensor it says how to save one."""
    refused = []

    def run():
        try:
            COPIES[how](OBJECTS[what](ctx))
        except wg.Error as error:
            refused.append(error)
            raise

    check(ctx.s, f"{how}({what})", run)
    if refused and how == "pickle.dumps":
        error = refused[0]
        assert isinstance(error, TypeError), f"pickle.dumps({what}) raised {describe(error)}: not a TypeError"
        if "Tensor" in what or what == "Variable":
            assert "save" in str(error), f"pickle.dumps({what}) does not say how to save one: {error}"


def test_a_fitted_estimator_pickles_and_predicts(ctx):
    restored = pickle.loads(pickle.dumps(ctx.fitted))
    np.testing.assert_array_equal(restored.predict(X, session=ctx.s), ctx.fitted.predict(X, session=ctx.s))
