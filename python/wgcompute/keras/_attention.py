"""Keras's ``MultiHeadAttention`` over [batch, seq, features], with Keras's masks."""

from __future__ import annotations

from typing import Any

from .. import _call, _layers, _logic, _nn_layers
from .._convert import _flag
from .._errors import InvalidArgumentError, ShapeError
from .._functional import KerasTensor, _symbolic_call
from .._tensor import Tensor, _tensor_argument
from ._layer import _next_seed, _Wrapped

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(_Wrapped):
    """Keras's ``MultiHeadAttention(num_heads, key_dim)``: ``layer(query, value=None, key=None,
    attention_mask=None, use_causal_mask=False)`` over [batch, seq, features], self-attention when ``value`` is
    None; the output has the query's width. The masks the inputs carry (or ``query_mask=``, ``value_mask=``,
    ``key_mask=``) restrict the attention as Keras's do, and the output carries the query's. Its weights are
    ``query_kernel``, ``query_bias``, ... ``output_bias`` (kernels [features, num_heads · key_dim])."""

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        dropout: float = 0.0,
        use_bias: bool = True,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_heads = _layers._width(num_heads, "num_heads")
        self.key_dim = _layers._width(key_dim, "key_dim")
        self._seed = seed
        self._config = {"num_heads": self.num_heads, "key_dim": self.key_dim, "dropout": dropout, "use_bias": use_bias}
        _layers._real(dropout, "dropout")

    def __call__(  # type: ignore[override]
        self,
        query: Any,
        value: Any = None,
        key: Any = None,
        query_mask: Any = None,
        value_mask: Any = None,
        key_mask: Any = None,
        attention_mask: Any = None,
        use_causal_mask: bool = False,
        training: bool | None = None,
    ) -> Any:
        if isinstance(query, KerasTensor):
            symbolic = [query, *(item for item in (value, key) if item is not None)]
            if key is not None and value is None:
                raise InvalidArgumentError("MultiHeadAttention takes a key only with a value")
            if any(item is not None for item in (query_mask, value_mask, key_mask, attention_mask)):
                raise InvalidArgumentError(
                    "in a functional model, MultiHeadAttention takes its masks from its inputs (an "
                    "Embedding(mask_zero=True)'s, say) and use_causal_mask, not as arguments"
                )
            arguments: dict[str, Any] = {"use_causal_mask": _flag(use_causal_mask, "use_causal_mask")}
            if training is not None:
                arguments["training"] = _flag(training, "training")
            return _symbolic_call(self, symbolic if len(symbolic) > 1 else query, arguments)
        if isinstance(query, (list, tuple)):
            # A node of a functional model: [query, value] or [query, value, key].
            query, value, key = (*query, None, None)[:3]
        query = _tensor_argument(query, "query")
        if not self.built:
            if query.ndim != 3:
                raise ShapeError(f"MultiHeadAttention takes [batch, seq, features]; got shape {query.shape}")
            inner = _nn_layers.MultiHeadAttention(
                query._owner(),
                query.shape[-1],
                self.num_heads,
                key_dim=self.key_dim,
                bias=self._config["use_bias"],
                dropout=self._config["dropout"],
                seed=_next_seed(self._seed),
            )
            self._adopt(inner)
            self.built = True
        # As Keras: the inputs' masks (a query's [batch, T], a value's or key's [batch, S]) join the
        # attention_mask [batch, T, S]; the output carries the query's mask.
        # As Keras: the inputs' masks (a query's [batch, T], a value's or key's [batch, S]; self-attention's value
        # is the query) join the attention_mask ([T, S], [batch, T, S] or [batch, heads, T, S]), and are taken off
        # the inputs; the output carries the query's.
        query_mask = _call._mask_of(query) if query_mask is None else query_mask
        if value_mask is None:
            value_mask = query_mask if value is None else _call._mask_of(value)
        if key is not None and key is not value and key_mask is None:
            key_mask = _call._mask_of(key)
        for tensor in (query, value, key):
            _call._set_mask(tensor, None)
        parts = []
        for mask, shape in ((query_mask, (1, -1, 1)), (value_mask, (1, 1, -1)), (key_mask, (1, 1, -1))):
            if mask is not None:
                mask = _call._bool_mask(query, mask)
                if mask.ndim != 2:
                    raise ShapeError(f"the query's, value's and key's masks are [batch, steps]; got shape {mask.shape}")
                batch, steps = mask.shape
                parts.append(mask.reshape(tuple(steps if d == -1 else d for d in (batch, *shape))))
        if attention_mask is not None:
            given = _call._bool_mask(query, attention_mask)
            if not 2 <= given.ndim <= 4:
                raise ShapeError(f"attention_mask is [T, S], [batch, T, S] or [batch, heads, T, S]; got {given.shape}")
            while given.ndim < 4:  # one mask for every head
                given = given.reshape((*given.shape[:-2], 1, *given.shape[-2:]))
            parts.append(given)
        allowed = None
        for part in parts:
            allowed = part if allowed is None else _logic.logical_and(allowed, part)
        output = self._inner(
            query,
            value=value,
            key=key,
            mask=allowed,
            causal=_flag(use_causal_mask, "use_causal_mask"),
            training=_call._training_of(self, training),
        )
        if query_mask is not None:
            _call._set_mask(output, _call._bool_mask(query, query_mask))
        return output

    def call(self, x: Any, training: bool = False) -> Tensor:
        return self(x, training=training)  # type: ignore[no-any-return]
