"""Optimizers: the library's Adam (TensorFlow's epsilon placement), AdamW, SGD with momentum (optionally
Nesterov's), and Keras's other optimizers, one class per row of the library's table of rules (RMSprop, Adagrad,
Adamax, Nadam, Lion, Adadelta, Ftrl; :mod:`wgcompute.optim._rules`), each step one fused pass per group of pool slabs
with the state in the session's pool.

Every optimizer takes Keras's ``clipnorm`` (each gradient's own norm clipped), ``global_clipnorm`` (the norm of all
of them together; not with ``clipnorm``) and ``clipvalue`` (elementwise, after any norm clipping), computed on the
device before the update, and a schedule of :mod:`wgcompute.optim.schedules` as its ``learning_rate``. The new
optimizers and SGD take Keras's ``weight_decay`` (decoupled: ``p −= lr·wd·p`` before the update).

``step(params, grads)`` or TensorFlow's ``apply_gradients(zip(grads, params))``; a None gradient leaves its
variable as it is. The state is kept per variable of the first call: a later call may pass any of those
variables in any order (they are matched by identity), and a variable the optimizer has never seen is an
``InvalidArgumentError``. Hyperparameters are checked by the library when the optimizer is made and when the
learning rate is set. Like every tensor, the state keeps no GPU memory after its session closes.
"""

from __future__ import annotations

from .. import _wgcompute
from .._convert import _flag
from . import _rules, schedules
from ._optimizer import Optimizer, _alias, _float, _native_of, _rate  # noqa: F401 (_native_of: for _io)
from ._rules import *  # noqa: F403 (one class per rule of the library's table)
from .schedules import LearningRateSchedule

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "schedules"]
__all__ += _rules.__all__


class Adam(Optimizer):
    """Adam with TensorFlow's epsilon placement (``tf.keras.optimizers.Adam`` with ``epsilon`` applied as in
    TensorFlow 1's ``AdamOptimizer``): ``lr_t = lr·sqrt(1−β2^t)/(1−β1^t)``, ``p −= lr_t·m/(sqrt(v)+ε)``. Keras's
    ``beta_1``, ``beta_2`` and ``epsilon`` are the same as ``beta1``, ``beta2`` and ``eps``. ``weight_decay`` is
    Keras's: ``p −= lr·weight_decay·p`` before the update (decoupled, as in Keras's AdamW; PyTorch's AdamW,
    with the other epsilon placement, is :class:`AdamW`)."""

    def __init__(
        self,
        lr: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        *,
        learning_rate: float | LearningRateSchedule | None = None,
        beta_1: float | None = None,
        beta_2: float | None = None,
        epsilon: float | None = None,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        rate = self._configure(_rate(lr, learning_rate, 0.001), clipnorm, clipvalue, global_clipnorm)
        self._native = _wgcompute.Optimizer.adam(
            rate,
            _alias(beta1, beta_1, "beta1 or beta_1", 0.9),
            _alias(beta2, beta_2, "beta2 or beta_2", 0.999),
            _alias(eps, epsilon, "eps or epsilon", 1e-8),
            0.0 if weight_decay is None else _float(weight_decay, "weight_decay"),
        )


class AdamW(Optimizer):
    """AdamW: Adam with Kingma & Ba's epsilon placement and decoupled weight decay, ``p −= lr·(m̂/(sqrt(v̂)+ε) +
    weight_decay·p)`` (PyTorch's ``AdamW``)."""

    def __init__(
        self,
        lr: float = 0.001,
        weight_decay: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        *,
        learning_rate: float | LearningRateSchedule | None = None,
        beta_1: float | None = None,
        beta_2: float | None = None,
        epsilon: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        rate = self._configure(_rate(lr, learning_rate, 0.001), clipnorm, clipvalue, global_clipnorm)
        self._native = _wgcompute.Optimizer.adamw(
            rate,
            _float(weight_decay, "weight_decay"),
            _alias(beta1, beta_1, "beta1 or beta_1", 0.9),
            _alias(beta2, beta_2, "beta2 or beta_2", 0.999),
            _alias(eps, epsilon, "eps or epsilon", 1e-8),
        )


class SGD(Optimizer):
    """SGD with momentum, PyTorch's form: ``buffer = momentum·buffer + grad; p −= lr·buffer`` (momentum 0 is
    plain SGD); with ``nesterov``, ``p −= lr·(grad + momentum·buffer)``. At a constant rate both are Keras's
    updates (Keras's velocity is ``−lr·buffer``)."""

    _flags = frozenset({"nesterov"})

    def __init__(
        self,
        lr: float = 0.01,
        momentum: float = 0.0,
        *,
        learning_rate: float | LearningRateSchedule | None = None,
        nesterov: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        rate = self._configure(_rate(lr, learning_rate, 0.01), clipnorm, clipvalue, global_clipnorm)
        self._native = _wgcompute.Optimizer.sgd(
            rate,
            _float(momentum, "momentum"),
            _flag(nesterov, "nesterov"),
            0.0 if weight_decay is None else _float(weight_decay, "weight_decay"),
        )
