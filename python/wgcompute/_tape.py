"""Gradient tapes: TensorFlow's ``tf.GradientTape`` over the library's tape. A tape records, on the thread that
entered it, the ops of which one operand it watches; :meth:`GradientTape.gradient` walks them back."""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from . import _tensor, _wgcompute
from ._convert import _flag, _not_picklable, _sequence
from ._errors import InvalidArgumentError, TapeError
from ._tensor import Tensor, Variable


class UnconnectedGradients(enum.Enum):
    """What :meth:`GradientTape.gradient` gives for a source the target does not depend on (TensorFlow's
    ``tf.UnconnectedGradients``)."""

    NONE = "none"
    ZERO = "zero"


class GradientTape:
    """Records the ops of its ``with`` block on the library's tape, for :meth:`gradient`, as TensorFlow's
    ``tf.GradientTape``::

        w = s.variable(np.zeros((4, 3)))
        with wgcompute.GradientTape() as tape:
            loss = wgcompute.softmax_cross_entropy(x @ w, y).mean()
        [dw] = tape.gradient(loss, [w])

    An op is recorded when one of its operands is watched: a trainable :class:`Variable` (watched as soon as it
    is used, unless ``watch_accessed_variables=False``), a tensor passed to :meth:`watch`, or a result recorded
    before. Other ops run as they do outside a tape, keeping nothing. Integer results (argmax, argmin,
    ``astype('uint32')``) carry no gradient and are not recorded. A float op without a gradient (max, min) is
    refused with an ``InvalidArgumentError`` naming it where a gradient would flow through it.

    ``persistent=False`` (the default): one :meth:`gradient` call, which frees each intermediate as soon as the
    backward walk passes it and releases the tape; a second call raises :class:`TapeError`. ``persistent=True``
    keeps everything until the tape is dropped (or :meth:`reset`), for several calls.

    Recording is per thread, as in TensorFlow: the tape records only on the thread that entered it. One tape
    records at a time on a thread: entering a second one inside the first raises :class:`TapeError` (higher-order
    gradients, a tape recording another tape's gradient, are not supported). The tape holds its values as every
    tensor does, weakly: after the session closes it keeps no GPU memory, and a gradient then raises
    :class:`SessionClosedError`.
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._native = _wgcompute.Tape()
        self._persistent = _flag(persistent, "persistent")
        self._watch_accessed = _flag(watch_accessed_variables, "watch_accessed_variables")
        self._thread: int | None = None
        self._paused = False
        self._watched: list[Variable] = []

    def __reduce__(self) -> Any:
        raise _not_picklable("GradientTape", "a tape records one computation in one process; record again there")

    @property
    def persistent(self) -> bool:
        return self._persistent

    def __enter__(self) -> GradientTape:
        current = getattr(_tensor._this_thread, "tape", None)
        if current is not None:
            raise TapeError(
                "another GradientTape already records on this thread: tapes do not nest (higher-order gradients "
                "are not supported). Leave the first tape's block before entering this one"
            )
        if self._native.is_released:
            raise TapeError(
                "this GradientTape was released by its first gradient() call; make a new one (or a persistent one)"
            )
        if self._thread is not None:
            raise TapeError(
                "this GradientTape records on another thread already: a tape records on the one thread that "
                "entered it. Make a tape per thread"
            )
        self._thread = threading.get_ident()
        _tensor._this_thread.tape = self
        if not self._paused:
            self._native.enter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if getattr(_tensor._this_thread, "tape", None) is not self:
            raise TapeError("a GradientTape's block must be left on the thread that entered it")
        self._native.exit()
        _tensor._this_thread.tape = None
        self._thread = None

    def _access(self, operands: Iterable[Tensor]) -> None:
        """An op is about to use ``operands``: the trainable variables among them are watched (unless the tape
        watches only what it is told, or is stopped or released)."""
        if self._paused or not self._watch_accessed:
            return
        native = self._native
        for operand in operands:
            if isinstance(operand, Variable) and operand._trainable:
                if native.is_released:
                    return
                if native.watch(operand._t):
                    self._watched.append(operand)

    def watch(self, tensor: Tensor | Iterable[Tensor]) -> None:
        """Records every op on ``tensor`` (float32; or each tensor of a list) from now on, so that a gradient
        can flow to it. A uint32 tensor is a ``DTypeError``: integers carry no gradient."""
        tensors = [tensor] if isinstance(tensor, Tensor) else _sequence(tensor, "what a GradientTape watches")
        for item in tensors:
            if not isinstance(item, Tensor):
                raise InvalidArgumentError(f"a GradientTape watches tensors and variables; got {type(item).__name__}")
            if self._native.watch(item._t) and isinstance(item, Variable):
                self._watched.append(item)

    def watched_variables(self) -> tuple[Variable, ...]:
        """The variables this tape watches, in the order it first saw them."""
        return tuple(self._watched)

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        """A block inside the tape's in which nothing is recorded."""
        if self._paused:
            yield
            return
        entered = self._thread == threading.get_ident()
        self._paused = True
        if entered:
            self._native.exit()
        try:
            yield
        finally:
            self._paused = False
            if entered:
                self._native.enter()

    def reset(self) -> None:
        """Forgets everything recorded (TensorFlow's ``reset``); the tape records afresh."""
        self._native.reset()
        self._watched.clear()

    def gradient(
        self,
        target: Tensor,
        sources: Any,
        output_gradients: Any = None,
        unconnected_gradients: UnconnectedGradients | str = UnconnectedGradients.NONE,
    ) -> Any:
        """The gradient of ``target`` with respect to ``sources``: one tensor for a tensor, a list for a list (a
        tuple for a tuple, a dict for a dict). Sources may be variables, watched tensors, or results recorded
        on the tape. A source ``target`` does not depend on gets None, or zeros with
        ``unconnected_gradients="zero"``. A target of several elements is differentiated as their sum, or
        weighted by ``output_gradients`` (a tensor or array of its shape)."""
        try:
            unconnected = UnconnectedGradients(unconnected_gradients)
        except ValueError:
            raise InvalidArgumentError(
                f"unconnected_gradients is 'none' or 'zero' (or UnconnectedGradients); got {unconnected_gradients!r}"
            ) from None
        if not isinstance(target, Tensor):
            raise InvalidArgumentError(f"the target of gradient() is one tensor; got {type(target).__name__}")
        if self._native.is_released:
            raise TapeError(
                "a GradientTape that is not persistent computes one set of gradients: this one was released by "
                "its first gradient() call. Make it with GradientTape(persistent=True) to ask for more"
            )
        if isinstance(sources, Tensor):
            flat, pack = [sources], lambda results: results[0]
        elif isinstance(sources, dict):
            keys = list(sources)
            flat, pack = [sources[key] for key in keys], lambda results: dict(zip(keys, results, strict=True))
        elif isinstance(sources, (list, tuple)):
            flat, pack = list(sources), tuple if isinstance(sources, tuple) else list
        else:
            raise InvalidArgumentError(
                f"sources are a tensor, or a list, tuple or dict of tensors; got {type(sources).__name__}"
            )
        for source in flat:
            if not isinstance(source, Tensor):
                raise InvalidArgumentError(
                    f"a source of gradient() is a tensor or variable; got {type(source).__name__}"
                )
        seed = None if output_gradients is None else target._operand(output_gradients)._t
        natives = self._native.gradient(target._t, [source._t for source in flat], seed, self._persistent)
        results = []
        for source, native in zip(flat, natives, strict=True):
            if native is not None:
                results.append(source._wrap(native))
            elif unconnected is UnconnectedGradients.ZERO:
                results.append(source._owner().zeros(source.shape))
            else:
                results.append(None)
        return pack(results)
