"""The methods of :class:`~wgcompute.Tensor` that compute from its values: the comparisons and bitwise operators,
the reductions (over axes, with NumPy's keywords; statistics, scans), softmax and clip; and the op tables' methods
and operators, which :func:`install_table_methods` makes from the rows of :mod:`._ops`. ``Tensor`` mixes
``_MathMethods`` in. These methods reach tensors only through ``self``, so this module does not import the tensor
module (which imports it): Tensor is the one class made with ``_MathMethods``, so ``isinstance(x, _MathMethods)``
asks whether ``x`` is a tensor."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _ops
from ._convert import _as, _dtype, _flag, _int_text, _number, _sequence
from ._errors import ArgumentOverflowError, ArgumentTypeError, DTypeError, InvalidArgumentError, ShapeError

if TYPE_CHECKING:
    from ._tensor import Tensor


class _MathMethods:
    """Tensor's methods that compute from its values (see the module)."""

    __slots__ = ()

    # --- comparisons, logical and bitwise operators (src/op/logic.rs); their results carry no gradient ---

    def _scalar_operand(self, value: Any) -> Tensor:
        """A Python scalar as a 0-d tensor of this tensor's dtype, as the standard mixes them: an int or float
        with float32, an int in range with an integer dtype, a bool with bool; others are a DTypeError."""
        dtype = self._t.dtype
        if dtype == "bool":
            fits = isinstance(value, (bool, np.bool_))
        elif dtype == "float32":
            fits = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
        else:
            fits = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
            if fits and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
                raise ArgumentOverflowError(
                    f"Python integer {_int_text(value)} is out of bounds for the {dtype} tensor it is combined with"
                )
        if not fits:
            raise DTypeError(
                f"a Python {type(value).__name__} cannot be combined with a {dtype} tensor (the standard mixes an "
                "int or float with float32, an int with an integer dtype, a bool with bool); convert with astype"
            )
        if dtype == "float32":
            value = _number(value)
        return self._owner().tensor(np.array(value, dtype=dtype))

    def _logic_operand(self, other: Any) -> Tensor | Any:
        if isinstance(other, _MathMethods):
            return other
        if isinstance(other, (bool, numbers.Number, np.bool_)):
            return self._scalar_operand(other)
        if isinstance(other, (np.ndarray, list, tuple, np.generic)):
            return self._operand(other)
        return NotImplemented

    def _logic(self, name: str, other: Any, reflected: bool = False) -> Tensor:
        operand = self._logic_operand(other)
        if operand is NotImplemented:
            return NotImplemented
        lhs, rhs = (operand, self) if reflected else (self, operand)
        return lhs._wrap(lhs._t.logic_binary(name, rhs._t))

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return self._logic("equal", other)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return self._logic("not_equal", other)

    def __lt__(self, other: Any) -> Tensor:
        return self._logic("less", other)

    def __le__(self, other: Any) -> Tensor:
        return self._logic("less_equal", other)

    def __gt__(self, other: Any) -> Tensor:
        return self._logic("greater", other)

    def __ge__(self, other: Any) -> Tensor:
        return self._logic("greater_equal", other)

    def __and__(self, other: Any) -> Tensor:
        return self._logic("bitwise_and", other)

    def __rand__(self, other: Any) -> Tensor:
        return self._logic("bitwise_and", other, reflected=True)

    def __or__(self, other: Any) -> Tensor:
        return self._logic("bitwise_or", other)

    def __ror__(self, other: Any) -> Tensor:
        return self._logic("bitwise_or", other, reflected=True)

    def __xor__(self, other: Any) -> Tensor:
        return self._logic("bitwise_xor", other)

    def __rxor__(self, other: Any) -> Tensor:
        return self._logic("bitwise_xor", other, reflected=True)

    def __lshift__(self, other: Any) -> Tensor:
        return self._logic("bitwise_left_shift", other)

    def __rlshift__(self, other: Any) -> Tensor:
        return self._logic("bitwise_left_shift", other, reflected=True)

    def __rshift__(self, other: Any) -> Tensor:
        return self._logic("bitwise_right_shift", other)

    def __rrshift__(self, other: Any) -> Tensor:
        return self._logic("bitwise_right_shift", other, reflected=True)

    def __invert__(self) -> Tensor:
        return self._wrap(self._t.logic_unary("bitwise_invert"))

    def _truth(self, name: str, axis: int | Sequence[int] | None, keepdims: bool) -> Tensor:
        return self._wrap(self._t.reduce_truth(name, self._axes(axis), _flag(keepdims, "keepdims")))

    def all(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Whether every element is nonzero (true), over ``axis`` (an int, a tuple, or None for all)."""
        return self._truth("all", axis, keepdims)

    def any(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Whether any element is nonzero (true), over ``axis`` (an int, a tuple, or None for all)."""
        return self._truth("any", axis, keepdims)

    def _reduce(self, name: str, axis: int | None) -> Tensor:
        axis = None if axis is None else self._axis(axis)
        return self._op((self,), lambda: self._t.reduce(name, axis))

    # Integer results carry no gradient, so they are never recorded.
    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index of the largest element (the first on ties, the first NaN if any), as a uint32 tensor; over all
        elements (a flat index) or along ``axis``, which ``keepdims`` keeps as a 1."""
        return self._arg(axis, keepdims, smallest=False)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index of the smallest element (the first on ties, the first NaN if any), as a uint32 tensor; as
        :meth:`argmax`."""
        return self._arg(axis, keepdims, smallest=True)

    def _arg(self, axis: int | None, keepdims: bool, smallest: bool) -> Tensor:
        axis = None if axis is None else self._axis(axis)
        if _flag(keepdims, "keepdims"):
            return self._wrap(self._t.arg_keepdims(axis, smallest))
        return self._wrap(self._t.argmin(axis) if smallest else self._t.argmax(axis))

    def _along_last(self, axis: int, op: str) -> Tensor:
        axis = self._axis(axis)
        last = self.ndim - 1
        if self.shape[axis] == 0:
            # Said in the caller's axis and shape: the library sees the axis moved last.
            raise ShapeError(f"{op} needs at least one element along axis {axis}; got shape {self.shape}")
        if axis == last:
            return self._op((self,), getattr(self._t, op))
        order = list(range(self.ndim))
        order[axis], order[last] = order[last], order[axis]
        # Each step is an op of its own, so a tape records the three and differentiates through them.
        return self.permute(order)._along_last(-1, op).permute(order)

    def softmax(self, axis: int = -1) -> Tensor:
        """exp(x) / Σ exp(x) along ``axis``, computed stably."""
        return self._along_last(axis, "softmax")

    def log_softmax(self, axis: int = -1) -> Tensor:
        return self._along_last(axis, "log_softmax")

    def clip(self, min: Any = None, max: Any = None) -> Tensor:
        """Each element limited to [``min``, ``max``] (scalars or tensors, broadcasting; None: no limit on that
        side), as the Array API's ``clip``: ``minimum(maximum(x, min), max)``, so NaN stays NaN, and where
        ``min > max`` the result is ``max``. A tape sends the gradient through where the element is strictly
        inside, half of it where it touches a limit."""
        result = self if min is None else self._clip_side(self, "maximum", min, "min")
        result = result if max is None else self._clip_side(result, "minimum", max, "max")
        return self.copy() if result is self else result

    def _clip_side(self, result: Tensor, name: str, limit: Any, what: str) -> Tensor:
        """One side of :meth:`clip`: a float32 tensor takes a scalar limit by the row's scalar form; an integer
        tensor an int limit as a 0-d tensor of its dtype (the scalar forms take float32 only)."""
        dtype = self._t.dtype
        if dtype == "float32" or isinstance(limit, _MathMethods) or not isinstance(limit, (numbers.Number, np.generic)):
            return result._with(name, limit)
        if isinstance(limit, (bool, np.bool_)) or not isinstance(limit, numbers.Integral):
            raise DTypeError(
                f"clip of a {dtype} tensor takes int limits (or tensors of its dtype); {what} is "
                f"{type(limit).__name__} {limit!r:.80}"
            )
        return result._binary(name, self._scalar_operand(limit))

    # --- the Array API's reductions over several axes, statistics, scans and shape ops ---

    def _axes(self, axis: int | Sequence[int] | None) -> list[int] | None:
        """``axis`` (None: all; an int; a sequence of ints, negative counting from the end) as axes from 0; an axis
        named twice is the library's to refuse."""
        if axis is None:
            return None
        if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
            return [self._axis(axis)]
        return [self._axis(a) for a in _sequence(axis, "axis (an int or a tuple of ints)")]

    def _reduce_over(self, name: str, axis: int | Sequence[int] | None, keepdims: bool) -> Tensor:
        keepdims = _flag(keepdims, "keepdims")
        if not keepdims and (axis is None or isinstance(axis, numbers.Integral)):
            # One axis or all: the op a tape fuses into a loss below it.
            return self._reduce(name, axis)
        axes = self._axes(axis)
        return self._op(
            (self,),
            lambda: self._t.reduce_axes(name, axes, keepdims),
        )

    def var(
        self,
        axis: int | Sequence[int] | None = None,
        *,
        correction: float = 0.0,
        keepdims: bool = False,
        ddof: float | None = None,
        dtype: Any = None,
        out: None = None,
    ) -> Tensor:
        """The variance over ``axis`` (None: all), dividing by ``N - correction`` (NaN where that is not positive),
        in two passes, so that a large mean costs no accuracy. ``ddof`` is NumPy's name for ``correction``;
        ``dtype`` and ``out`` are taken as :meth:`sum` takes them."""
        correction = _correction(correction, ddof)
        return self._numpy_keywords("var", dtype, out)._statistic(axis, correction, keepdims, root=False)

    def std(
        self,
        axis: int | Sequence[int] | None = None,
        *,
        correction: float = 0.0,
        keepdims: bool = False,
        ddof: float | None = None,
        dtype: Any = None,
        out: None = None,
    ) -> Tensor:
        """The standard deviation, the square root of :meth:`var`."""
        correction = _correction(correction, ddof)
        return self._numpy_keywords("std", dtype, out)._statistic(axis, correction, keepdims, root=True)

    def _numpy_keywords(self, name: str, dtype: Any, out: Any) -> Tensor:
        """This tensor as reduction ``name`` takes it with NumPy's keywords (``numpy.sum(t)`` calls
        ``t.sum(axis=..., dtype=None, out=None)``): converted to ``dtype`` where one is given; an ``out`` is
        refused, since a tensor is never written in place."""
        if out is not None:
            raise ArgumentTypeError(f"{name} cannot write into out= (tensors are immutable); use the tensor it returns")
        if dtype is None:
            return self
        return _as(self, _dtype(dtype, f"{name}'s dtype="))

    def _statistic(self, axis: Any, correction: Any, keepdims: Any, root: bool) -> Tensor:
        axes, keepdims = self._axes(axis), _flag(keepdims, "keepdims")
        correction = _number(correction, "correction")
        eager = self._t.std if root else self._t.var
        return self._op(
            (self,),
            lambda: eager(axes, correction, keepdims),
        )

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """``log(sum(exp(x)))`` over ``axis``, shifted by the max so that nothing overflows."""
        axes, keepdims = self._axes(axis), _flag(keepdims, "keepdims")
        return self._op(
            (self,),
            lambda: self._t.logsumexp(axes, keepdims),
        )

    def cumulative_sum(self, axis: int | None = None, *, include_initial: bool = False) -> Tensor:
        """Running sums along ``axis`` (optional for a 1-D tensor); ``include_initial`` starts with a 0."""
        return self._cumulative(axis, include_initial, prod=False)

    def cumulative_prod(self, axis: int | None = None, *, include_initial: bool = False) -> Tensor:
        """Running products along ``axis`` (optional for a 1-D tensor); ``include_initial`` starts with a 1. Under
        a tape the gradient divides by each element: where a lane holds a zero it is not finite."""
        return self._cumulative(axis, include_initial, prod=True)

    def _cumulative(self, axis: int | None, include_initial: Any, prod: bool) -> Tensor:
        axis = None if axis is None else self._axis(axis)
        initial = _flag(include_initial, "include_initial")
        return self._op(
            (self,),
            lambda: self._t.cumulative(axis, initial, prod),
        )


def _unary_method(name: str, doc: str, row: str | None = None) -> Callable[[Tensor], Tensor]:
    """The method ``name`` of the unary row ``row`` (default: the row of that name)."""
    of = name if row is None else row

    def method(self: Tensor) -> Tensor:
        return self._unary(of)

    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    method.__doc__ = doc
    return method


def _binary_method(name: str, doc: str) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return self._with(name, other)

    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    method.__doc__ = f"{doc} ``other`` is a tensor, an array or a Python scalar."
    return method


def _correction(correction: Any, ddof: Any) -> Any:
    """std's and var's ``correction``, which NumPy calls ``ddof`` (and always passes, 0 by default)."""
    if ddof is None or (isinstance(ddof, numbers.Real) and ddof == 0 and not isinstance(ddof, bool)):
        return correction
    if isinstance(correction, numbers.Real) and correction != 0 and correction != ddof:
        raise InvalidArgumentError(
            f"give correction or ddof (NumPy's name for it), not both; got {correction} and {ddof}"
        )
    return ddof


def _reduce_method(name: str, doc: str) -> Callable[..., Tensor]:
    def method(
        self: Tensor,
        axis: int | Sequence[int] | None = None,
        keepdims: bool = False,
        *,
        dtype: Any = None,
        out: None = None,
    ) -> Tensor:
        return self._numpy_keywords(name, dtype, out)._reduce_over(name, axis, keepdims)

    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    method.__doc__ = (
        f"{doc} Over all elements (``axis=None``), along ``axis`` or a tuple of axes (negative count from the "
        "end); ``keepdims`` keeps each reduced axis as a 1. ``dtype`` (one of the tensors' four) converts first; "
        "``out`` is None (tensors are immutable): both as ``numpy.sum(t)`` passes them."
    )
    return method


def _operator_methods(binary: str, doc: str, operator: _ops.Operator) -> tuple[Callable[..., Tensor], ...]:
    """``__op__`` and ``__rop__`` of a binary row: a real scalar operand takes the row's scalar form, a tensor or
    array (or list, tuple, NumPy scalar) the binary row; any other operand is NotImplemented."""

    def forward(self: Tensor, other: Any) -> Tensor:
        return self._scalar_or_tensor(other, operator.scalar, binary)

    reflected_scalar = operator.reflected_scalar
    if reflected_scalar is None:

        def reflected(self: Tensor, other: Any) -> Tensor:
            return forward(self, other)

    else:

        def reflected(self: Tensor, other: Any) -> Tensor:
            if self._t.dtype != "float32" and isinstance(other, (bool, numbers.Real)):
                return self._scalar_operand(other)._binary(binary, self)
            if isinstance(other, numbers.Real) and not isinstance(other, bool):
                return self._unary(reflected_scalar, _number(other))
            return getattr(self._operand(other), forward.__name__)(self)

    for method, name in ((forward, f"__{operator.dunder}__"), (reflected, f"__r{operator.dunder}__")):
        method.__name__ = name
        method.__qualname__ = f"Tensor.{name}"
        method.__doc__ = doc
    return forward, reflected


# Tensors are immutable, as TensorFlow's are: ``t += 1`` would otherwise rebind ``t`` to a new tensor without a
# word, which reads as a write to anyone who holds the old one. Each in-place operator says what to use instead.
_IN_PLACE = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift")


def _in_place_refusal(dunder: str, variable: type) -> Callable[[Tensor, Any], Tensor]:
    def refuse(self: Tensor, other: Any) -> Tensor:
        if isinstance(self, variable):
            raise ArgumentTypeError(
                f"variables change only through their methods: use v.assign(...), v.assign_add(...) or "
                f"v.assign_sub(...) in place of an in-place operator (__i{dunder}__)"
            )
        raise ArgumentTypeError(
            f"tensors are immutable (__i{dunder}__): write t = t <op> other for a new tensor, keep what changes "
            f"in a Variable and use its assign/assign_add/assign_sub, or pick values with wgcompute.where"
        )

    refuse.__name__ = refuse.__qualname__ = f"Tensor.__i{dunder}__"
    return refuse


def install_table_methods(tensor: type, variable: type) -> None:
    """Gives ``tensor`` one method per row of the library's op tables and two operators per binary row (a new row
    needs no edit here), and the in-place operators' refusals, whose message names ``variable``'s methods."""
    for row in _ops.UNARY_ROWS:
        if not row.takes_scalar and not hasattr(tensor, row.name):
            setattr(tensor, row.name, _unary_method(row.name, row.doc))
    for named in _ops.REDUCE_ROWS:
        setattr(tensor, named.name, _reduce_method(named.name, named.doc))
    for named in _ops.BINARY_ROWS:
        if not hasattr(tensor, named.name):
            setattr(tensor, named.name, _binary_method(named.name, named.doc))
        if named.name in _ops.OPERATORS:
            for method in _operator_methods(named.name, named.doc, _ops.OPERATORS[named.name]):
                setattr(tensor, method.__name__, method)
    # The Array API's name for the table's neg.
    tensor.negative = _unary_method("negative", "``-x`` elementwise (the Array API's name for neg).", "neg")  # type: ignore[attr-defined]
    for dunder in _IN_PLACE:
        setattr(tensor, f"__i{dunder}__", _in_place_refusal(dunder, variable))
