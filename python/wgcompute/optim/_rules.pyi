"""Keras's optimizers beside Adam and SGD, one class per row of the library's table of rules, written by
python/tools/stubs.py from the package (the classes are made from the rows at import): edit the rows in
src/op/optim.rs, then run the tool, not this file."""

from ._optimizer import _Keras
from .schedules import LearningRateSchedule

__all__ = [
    "RMSprop",
    "Adagrad",
    "Adamax",
    "Nadam",
    "Lion",
    "Adadelta",
    "Ftrl",
]

RULE_CLASSES: dict[str, type[_Keras]]

class RMSprop(_Keras):
    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        rho: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-07,
        centered: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None: ...

class Adagrad(_Keras):
    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        initial_accumulator_value: float = 0.1,
        epsilon: float = 1e-07,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None: ...

class Adamax(_Keras):
    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-07,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None: ...

class Nadam(_Keras):
    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-07,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None: ...

class Lion(_Keras):
    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.99,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None: ...

class Adadelta(_Keras):
    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        rho: float = 0.95,
        epsilon: float = 1e-07,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None: ...

class Ftrl(_Keras):
    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        learning_rate_power: float = -0.5,
        initial_accumulator_value: float = 0.1,
        l1_regularization_strength: float = 0.0,
        l2_regularization_strength: float = 0.0,
        l2_shrinkage_regularization_strength: float = 0.0,
        beta: float = 0.0,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None: ...
