"""The exceptions wgcompute raises: one class per kind of error, all under :class:`Error`, each also the builtin
exception a Python user would catch (``except MemoryError`` catches :class:`OutOfMemoryError`). The message is
the library's and says what to do next. After any of them but :class:`DeviceLostError` the session goes on
working."""


class Error(Exception):
    """Every error wgcompute raises."""


class OutOfMemoryError(Error, MemoryError):
    """A request over the session's memory cap, over what the device could give (``by_driver``), or larger than any
    single buffer may be. Attributes: ``requested``, ``in_use``, ``reserved``, ``limit`` (bytes; ``limit`` is None
    without a cap) and ``by_driver``."""

    requested: int | None = None
    in_use: int | None = None
    reserved: int | None = None
    limit: int | None = None
    by_driver: bool = False


class ShapeError(Error, ValueError):
    """Shapes that do not fit the operation (matmul's inner sizes, broadcasting, an axis out of range, ...)."""


class DTypeError(Error, TypeError):
    """A tensor or array of a dtype the operation does not take."""


class InvalidArgumentError(Error, ValueError):
    """An argument out of its range: a NaN hyperparameter, an unknown adapter, a memory limit that is no size..."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of a type the call does not take (a shape that is no sequence, a tuning that is no string, an
    object pickled that holds GPU memory): an :class:`InvalidArgumentError` that ``except TypeError`` catches too."""


class ArgumentOverflowError(InvalidArgumentError, OverflowError):
    """A number too large for the conversion it needs: a Python int beyond float64's range where a float is
    taken (``t + 10**400``), refused as NumPy refuses it ("int too large to convert to float"), rather than
    becoming inf. An :class:`InvalidArgumentError` that ``except OverflowError`` catches too. (A float beyond
    float32's range still rounds to inf, as ``astype`` rounds it.)"""


class SessionMismatchError(Error, ValueError):
    """Tensors of two different sessions in one operation."""


class IndexOutOfRangeError(Error, IndexError):
    """An index that does not fit the tensor: an integer past the end of its axis (the message names the axis and
    its size), too many indices, a mask of the wrong shape."""


class SessionClosedError(Error, RuntimeError):
    """The session was closed; its GPU memory is released. Open a new session and upload the data again."""


class SuspendedError(Error, RuntimeError):
    """The session is suspended (its tensors are in host memory); call ``resume()`` first."""


class NotSuspendedError(Error, RuntimeError):
    """``resume()`` on a session that is not suspended."""


class DeviceLostError(Error, RuntimeError):
    """The GPU device was lost; close the session and open a new one."""


class AdapterError(Error, RuntimeError):
    """No adapter matched, or the adapter would not open a device."""


class CheckpointError(Error, ValueError):
    """A checkpoint file that cannot be read or written, or is not what it claims to be."""


class TuningCacheError(Error, OSError):
    """The kernel tuning cache could not be written."""


class DivergedError(Error, ArithmeticError):
    """Training produced a loss that is not a number. Attributes: ``step``, ``loss``."""


class DriverError(Error, RuntimeError):
    """The GPU driver refused an operation."""


class ForkedError(Error, RuntimeError):
    """A session or tensor used in a process forked from the one that opened it."""


class TapeError(Error, RuntimeError):
    """A :class:`GradientTape` used in a way it does not allow: a second ``gradient()`` on a tape that is not
    persistent (it let go of what it recorded after the first), a tape entered on one thread while another
    records there (nested tapes; higher-order gradients are not supported), or left on another thread."""
