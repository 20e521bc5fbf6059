"""Reading a model file :meth:`Model.save` wrote: :func:`load_model` checks the file and its configuration entry
by entry, rebuilds the layers (the package's, and the custom ones of Keras's registry and scopes) and loads
the weights bit for bit."""

from __future__ import annotations

import json
import os
import stat
import struct
from collections.abc import Callable
from typing import Any

from . import _registry, optim
from ._compile import Loss
from ._convert import _flag
from ._errors import (
    ArgumentTypeError,
    CheckpointError,
)
from ._functional import _ARGUMENT_KINDS, Input, KerasTensor, _symbolic_call
from ._metrics import _metric_of
from ._model import Model, Sequential
from ._tensor_files import load_tensors

__all__ = ["load_model"]


def _open_regular(path: str) -> Any:
    """``path`` opened for reading as a binary file, refused unless it is a regular file: a FIFO is opened without
    blocking (there may be no writer, ever) and then refused, as a directory or a device is."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        raise CheckpointError(f"cannot read {path!r}: {error.strerror}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(mode)
                else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file"
            )
            raise CheckpointError(f"{path!r} is {kind}; a model is read from a regular file that Model.save wrote")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _read_metadata(path: str) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file's header, read on the host."""
    with _open_regular(path) as file:
        try:
            head = file.read(8)
            if len(head) != 8:
                raise CheckpointError(f"{path!r} is not a safetensors file: shorter than its header")
            (length,) = struct.unpack("<Q", head)
            if length > 100 * 2**20:
                raise CheckpointError(f"{path!r}: a header of {length} bytes is not believable")
            header = json.loads(file.read(length))
        except OSError as error:
            raise CheckpointError(f"cannot read {path!r}: {error.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise CheckpointError(f"{path!r} is not a safetensors file: its header is no JSON") from None
        except RecursionError:
            raise CheckpointError(
                f"{path!r} is not a safetensors file: its header's JSON is nested too deeply"
            ) from None
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    return metadata if isinstance(metadata, dict) else {}


class _ModelConfig:
    """A model file's configuration, checked entry by entry before anything is built from it: a file that is
    not what :meth:`Model.save` writes is a :class:`CheckpointError` naming the first thing wrong."""

    def __init__(self, path: str, text: Any, custom_objects: dict[str, Any] | None = None) -> None:
        self.path = path
        if not isinstance(text, str):
            raise self.bad(f"its config entry is a {type(text).__name__}, not JSON text")
        try:
            config = json.loads(text)
        except RecursionError:
            raise self.bad("its JSON is nested too deeply") from None
        except json.JSONDecodeError as error:
            raise self.bad(f"it is not JSON ({error})") from None
        config = self.mapping(config, "the configuration")
        name = config.get("name")
        if name is not None and not isinstance(name, str):
            raise self.bad(f"'name' is a {type(name).__name__}, not a string")
        self.name: str | None = name
        shape = self.field(config, "input_shape", list, "the configuration")
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
            raise self.bad(f"'input_shape' is a list of sizes of at least 1; got {shape!r:.80}")
        self.input_shape = tuple(shape)
        self.layers: list[Any] = []
        for index, entry in enumerate(self.field(config, "layers", list, "the configuration")):
            where = f"layer {index}"
            entry = self.mapping(entry, where)
            class_name = self.field(entry, "class", str, where)
            registered = entry.get("registered_name")
            if registered is not None and not isinstance(registered, str):
                raise self.bad(f"'registered_name' of {where} is a JSON {_json_kind(registered)}, not a string")
            # Keras's order: the objects given to the load, the open scopes, the registered ones, the package's.
            kind = _registry.lookup([name for name in (registered, class_name) if name], custom_objects)
            if kind is None:
                kind = _registry.PACKAGE_LAYERS.get(class_name)
            if not isinstance(kind, type):
                raise self.bad(
                    f"{where} names an unknown layer class {registered or class_name!r:.80}: register the class "
                    "with keras.saving.register_keras_serializable() or pass it in custom_objects="
                )
            settings = self.mapping(self.field(entry, "config", dict, where), f"{where}'s config")
            layer = self.build(
                lambda kind=kind, settings=settings: _from_config(kind, settings), f"{where} ({class_name})"
            )
            self.layers.append(layer)
        self.kind = config.get("class", "Sequential")
        if self.kind not in ("Sequential", "Functional"):
            raise self.bad(f"'class' is 'Sequential' or 'Functional'; got {self.kind!r:.80}")
        self.nodes: list[tuple[int, list[int], dict[str, Any]]] = []
        if self.kind == "Functional":
            for position, node in enumerate(self.field(config, "nodes", list, "the configuration")):
                where = f"node {position}"
                node = self.mapping(node, where)
                layer, parents = self.field(node, "layer", int, where), self.field(node, "parents", list, where)
                if not 0 <= layer < len(self.layers):
                    raise self.bad(f"{where} names layer {layer} of {len(self.layers)}")
                if not parents or not all(
                    isinstance(p, int) and not isinstance(p, bool) and -1 <= p < position for p in parents
                ):
                    raise self.bad(f"{where}'s parents are earlier nodes (or -1, the input); got {parents!r:.80}")
                arguments = self.mapping(node.get("arguments", {}), f"{where}'s arguments")
                if not all(isinstance(value, _ARGUMENT_KINDS) for value in arguments.values()):
                    raise self.bad(f"{where}'s arguments are numbers, strings, booleans or null")
                self.nodes.append((layer, parents, arguments))
            if not self.nodes:
                raise self.bad("a functional model has at least one node")
        self.compile: tuple[Any, Loss, list[str]] | None = None
        settings = config.get("compile")
        if settings is not None:
            self.compile = self.compile_settings(self.mapping(settings, "'compile'"))

    def bad(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.path!r} has a malformed model configuration: {what}")

    def mapping(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.bad(f"{where} is a JSON {_json_kind(value)}, not an object")
        return value

    def field(self, mapping: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if key not in mapping:
            raise self.bad(f"{where} has no {key!r}")
        value = mapping[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            expected = "number" if isinstance(kind, tuple) else _json_kind(kind())
            raise self.bad(f"{key!r} of {where} is a JSON {_json_kind(value)}, not a JSON {expected}")
        return value

    def build(self, make: Callable[[], Any], what: str) -> Any:
        """``make()``, its refusal of the file's settings (a wrong type, a value out of range, an unknown name)
        raised as this file's error."""
        try:
            return make()
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as error:
            message = str(error) if not isinstance(error, RecursionError) else "settings nested too deeply"
            raise self.bad(f"{what}: {message[:300]}") from None

    def compile_settings(self, settings: dict[str, Any]) -> tuple[Any, Loss, list[str]]:
        """The optimizer, loss and metrics the model was compiled with."""
        optimizer_name = self.field(settings, "optimizer", str, "'compile'")
        kind = getattr(optim, optimizer_name, None)
        if not (isinstance(kind, type) and issubclass(kind, optim.Optimizer)):
            raise self.bad(f"it names an unknown optimizer {optimizer_name!r:.80}")
        optimizer_config = settings.get("optimizer_config")
        if optimizer_config is not None:
            optimizer_config = self.mapping(optimizer_config, "'optimizer_config'")
            optimizer = self.build(lambda: kind.from_config(optimizer_config), f"optimizer {optimizer_name}")
        else:
            # Written before optimizers had configurations: the class and its rate.
            rate = self.field(settings, "learning_rate", (int, float), "'compile'")

            def made() -> Any:
                optimizer = kind()
                optimizer.learning_rate = float(rate)
                return optimizer

            optimizer = self.build(made, f"optimizer {optimizer_name}")
        loss_config = self.field(settings, "loss", dict, "'compile'")
        loss_name = self.field(loss_config, "name", str, "'loss'")
        from_logits = self.field(loss_config, "from_logits", bool, "'loss'")
        loss = self.build(lambda: Loss(loss_name, from_logits=from_logits), "the loss")
        metrics = self.field(settings, "metrics", list, "'compile'")
        for metric in metrics:
            if not isinstance(metric, str):
                raise self.bad(f"'metrics' holds a JSON {_json_kind(metric)}, not a metric's name")
            self.build(lambda metric=metric: _metric_of(metric, loss), "'metrics'")
        return optimizer, loss, list(metrics)


def _from_config(kind: type, settings: dict[str, Any]) -> Any:
    """A layer made from its saved config: its class's ``from_config``, else the class called with it."""
    make = getattr(kind, "from_config", None)
    return make(dict(settings)) if callable(make) else kind(**settings)


def _json_kind(value: Any) -> str:
    """The JSON name of a parsed value's kind."""
    for kind, name in ((bool, "boolean"), (str, "string"), (int, "number"), (float, "number"), (list, "array")):
        if isinstance(value, kind):
            return name
    return "object" if isinstance(value, dict) else "null" if value is None else type(value).__name__


def _model_of(config: _ModelConfig, device: Any, memory_limit: Any) -> Model:
    """The model a file's configuration describes: its layers in a chain, or applied along its graph."""
    if config.kind == "Sequential":
        return Sequential(config.layers, name=config.name, device=device, memory_limit=memory_limit)
    inputs = Input(shape=config.input_shape)
    made: dict[int, KerasTensor] = {-1: inputs}
    for position, (layer, parents, arguments) in enumerate(config.nodes):
        operands = [made[parent] for parent in parents]
        operand = operands[0] if len(operands) == 1 else operands
        made[position] = _symbolic_call(config.layers[layer], operand, arguments)
    return Model(inputs, made[len(config.nodes) - 1], name=config.name, device=device, memory_limit=memory_limit)


def load_model(
    filepath: str | os.PathLike[str],
    custom_objects: dict[str, Any] | None = None,
    compile: bool = True,  # noqa: A002 - Keras's name
    safe_mode: bool = True,
    *,
    device: int | str | None = None,
    memory_limit: str | float | int | None = None,
) -> Model:
    """Reads a model :meth:`Model.save` wrote: its layers rebuilt, its weights bit for bit, compiled as it was
    (with a fresh optimizer of the same class and settings, schedule and clipping included; its moments are not
    saved) unless ``compile=False``. Custom layers are found in ``custom_objects`` (by class or registered name),
    an open ``keras.saving.custom_object_scope``, or the classes registered with
    ``keras.saving.register_keras_serializable``. A file that is not one (not a regular file, not safetensors, a
    configuration that is not Model.save's) is a :class:`CheckpointError`; ``filepath`` not a path an
    :class:`ArgumentTypeError`. ``safe_mode`` is Keras's: the file holds no code to refuse, so it changes
    nothing."""
    if custom_objects is not None and not isinstance(custom_objects, dict):
        raise ArgumentTypeError(f"custom_objects is a dict of names to classes; got {type(custom_objects).__name__}")
    _flag(safe_mode, "safe_mode")

    if not isinstance(filepath, (str, bytes, os.PathLike)):
        raise ArgumentTypeError(
            f"load_model's filepath is a str, bytes or os.PathLike naming a file Model.save wrote; got "
            f"{type(filepath).__name__} {filepath!r:.80}"
        )
    path = os.fsdecode(os.fspath(filepath))
    metadata = _read_metadata(path)
    if metadata.get("format") != "wgcompute.keras":
        raise CheckpointError(f"{path!r} holds no model saved by Model.save (no wgcompute.keras format)")
    config = _ModelConfig(path, metadata.get("config"), custom_objects)
    model = _model_of(config, device, memory_limit)
    try:
        config.build(lambda: model.build((None, *config.input_shape)), f"building it for {config.input_shape}")
        model.load_state_dict(load_tensors(path, model._model_session()))
        if compile and config.compile is not None:
            optimizer, loss, metrics = config.compile
            model.compile(optimizer, loss, metrics=metrics)
    except BaseException:
        model.close()
        raise
    return model
