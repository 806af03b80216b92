"""Spillway's exceptions, named as onnxruntime's (``onnxruntime.capi.onnxruntime_pybind11_state``).

Every engine error is raised as one of these with the engine's own message. All derive from
:class:`Fail`, itself a :class:`RuntimeError`; :class:`InvalidArgument` is also a
:class:`ValueError` (onnxruntime raises ``ValueError`` for a missing input).
"""


class Fail(RuntimeError):
    """An engine error (the base of Spillway's exceptions)."""


class InvalidArgument(Fail, ValueError):
    """An input or output name, element type, shape or kind that the model does not take."""


class NoSuchFile(Fail):
    """The model file does not exist."""


class InvalidProtobuf(Fail):
    """The bytes are not an ONNX model."""


class InvalidGraph(Fail):
    """The model decodes but is not a valid graph."""


class NotImplemented(Fail):  # noqa: A001 - onnxruntime's name
    """An operator, attribute or element type Spillway does not support."""


class RuntimeException(Fail):
    """A kernel failed while running, or a run went past one of its limits."""


class EPFail(Fail):
    """A device (execution provider) that was asked for is unavailable."""


__all__ = [
    "Fail",
    "InvalidArgument",
    "NoSuchFile",
    "InvalidProtobuf",
    "InvalidGraph",
    "NotImplemented",
    "RuntimeException",
    "EPFail",
]
