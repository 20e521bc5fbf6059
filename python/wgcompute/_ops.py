"""The op tables that :class:`Tensor`'s op methods and operators are made from: the library's rows (unary,
binary, reduction), as the extension lists them, and the Python operator that writes each binary row. A new
library row becomes a method with no edit here; a new binary row needs its row in :data:`OPERATORS`."""

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

# Keyed by binary row; every binary row has one (a test checks), as has every scalar row of the unary table.
OPERATORS: dict[str, Operator] = {
    "add": Operator("add", "add_scalar", None),
    "sub": Operator("sub", "sub_scalar", "scalar_sub"),
    "mul": Operator("mul", "mul_scalar", None),
    "div": Operator("truediv", "div_scalar", "scalar_div"),
}
