"""The op tables that :class:`Tensor`'s op methods and operators are made from: the library's rows (unary,
binary, reduction), as the extension lists them, the Python operator that writes a binary row and each binary
row's scalar forms. A new library row becomes a method with no edit here; a new binary row with an operator or
scalar forms needs its row in :data:`OPERATORS` or :data:`SCALAR_ROWS`."""

from __future__ import annotations

from typing import NamedTuple

from . import _wgcompute


class UnaryRow(NamedTuple):
    name: str
    # Whether the op takes a scalar operand (``x + c``): those rows are reached through operators, not methods.
    takes_scalar: bool
    doc: str


class NamedRow(NamedTuple):
    name: str
    doc: str


class Operator(NamedTuple):
    """How Python writes a binary row: ``__{dunder}__`` and ``__r{dunder}__`` (the names of the ``operator``
    module's functions), the unary row of ``tensor ∘ scalar``, and that of ``scalar ∘ tensor``: None where the
    op commutes, so that the reflected form is the forward one."""

    dunder: str
    scalar: str
    reflected_scalar: str | None


_unary, _binary, _reduce = _wgcompute.op_tables()
UNARY_ROWS: tuple[UnaryRow, ...] = tuple(UnaryRow(*row) for row in _unary)
BINARY_ROWS: tuple[NamedRow, ...] = tuple(NamedRow(*row) for row in _binary)
REDUCE_ROWS: tuple[NamedRow, ...] = tuple(NamedRow(*row) for row in _reduce)
del _unary, _binary, _reduce

# Keyed by binary row, for the rows Python writes with an operator; every scalar row of the unary table is a form
# of one of these or of SCALAR_ROWS (a test checks).
OPERATORS: dict[str, Operator] = {
    "add": Operator("add", "add_scalar", None),
    "sub": Operator("sub", "sub_scalar", "scalar_sub"),
    "mul": Operator("mul", "mul_scalar", None),
    "div": Operator("truediv", "div_scalar", "scalar_div"),
    "pow": Operator("pow", "pow_scalar", "scalar_pow"),
    "remainder": Operator("mod", "remainder_scalar", "scalar_remainder"),
    "floor_divide": Operator("floordiv", "floor_divide_scalar", "scalar_floor_divide"),
}

# Each binary row's scalar forms, (``tensor ∘ scalar``, ``scalar ∘ tensor``: None where the op commutes), those of
# its operator included: what a function of the row (``maximum(t, 0.0)``) runs for a Python scalar operand. A
# row without an entry takes a scalar as a 0-d tensor.
SCALAR_ROWS: dict[str, tuple[str, str | None]] = {
    **{binary: (written.scalar, written.reflected_scalar) for binary, written in OPERATORS.items()},
    "maximum": ("maximum_scalar", None),
    "minimum": ("minimum_scalar", None),
}

# The Array API's name for each row whose function is named otherwise; a row not here is a function of its own
# name, except those in METHOD_ONLY.
FUNCTION_NAMES: dict[str, str] = {"neg": "negative", "sub": "subtract", "mul": "multiply", "div": "divide"}
# Rows that are a tensor method and no function: the Array API copies with ``asarray(x, copy=True)``.
METHOD_ONLY: frozenset[str] = frozenset({"copy"})
