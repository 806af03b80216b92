"""Spillway: an ONNX inference engine, behind onnxruntime's Python API.

Switching from onnxruntime is one import::

    import spillway as ort            # was: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"input": array})

Spillway's own options are keyword arguments of :class:`InferenceSession`: ``devices=``
(``["cpu:2", "cuda:0"]``) and ``placement=`` (a policy name such as ``"auto"`` or
``"hios-lp"``), and :meth:`InferenceSession.placement_report` says where each node runs.
"""

from __future__ import annotations

import datetime
import enum
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import _errors, _spillway
from ._errors import (
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    NoSuchFile,
    NotImplemented,  # noqa: A004 - onnxruntime's name
    RuntimeException,
)

__version__ = _spillway.__version__

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


def get_version_string() -> str:
    """Spillway's version."""
    return __version__


def get_build_info() -> str:
    """What this build of Spillway holds (the CUDA backend or not)."""
    cuda = "with CUDA" if _spillway.cuda_compiled else "without CUDA"
    return f"Spillway {__version__}, Build Info: {cuda}"


def get_all_providers() -> list[str]:
    """The execution providers Spillway knows, highest priority first (the CPU last)."""
    return [CUDA, CPU]


def get_available_providers() -> list[str]:
    """The execution providers of this build: the CUDA one when the CUDA backend is compiled
    in (a session still fails if no GPU is found), and the CPU."""
    return [CUDA, CPU] if _spillway.cuda_compiled else [CPU]


def get_device() -> str:
    """``"GPU"`` when this build has the CUDA backend, else ``"CPU"``."""
    return "GPU" if _spillway.cuda_compiled else "CPU"


def placement_policies() -> list[str]:
    """The names ``placement=`` accepts (case, ``-`` and ``_`` are ignored)."""
    return list(_spillway.placement_policies())


class GraphOptimizationLevel(enum.IntEnum):
    """How much the graph is rewritten (onnxruntime's levels; Spillway has three)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """Sequential, or parallel over ``inter_op_num_threads`` CPU lanes."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """onnxruntime's session options. Those Spillway acts on: ``intra_op_num_threads``,
    ``inter_op_num_threads`` with ``execution_mode = ORT_PARALLEL`` (CPU lanes),
    ``graph_optimization_level``, ``enable_profiling`` and ``profile_file_prefix`` (a Chrome
    trace). The others are kept and ignored."""

    def __init__(self) -> None:
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.enable_profiling = False
        self.profile_file_prefix = "spillway_profile"
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.optimized_model_filepath = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self._config: dict[str, str] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Stores a configuration entry (kept, not acted on)."""
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        """A configuration entry stored before."""
        try:
            return self._config[key]
        except KeyError:
            raise Fail(f"SessionOptions does not have configuration with key: {key}") from None


class RunOptions:
    """onnxruntime's run options: accepted and kept; Spillway's runs take none of them."""

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config: dict[str, str] = {}

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Stores a configuration entry (kept, not acted on)."""
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        """A configuration entry stored before."""
        try:
            return self._config[key]
        except KeyError:
            raise Fail(f"RunOptions does not have configuration with key: {key}") from None


class NodeArg:
    """A model input or output: ``name``, ``type`` (``"tensor(float)"``) and ``shape`` (ints,
    names of symbolic dimensions, ``None`` where nothing is known)."""

    def __init__(self, name: str, type: str, shape: list[Any]) -> None:  # noqa: A002
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"

    __str__ = __repr__


class ModelMetadata:
    """The model's metadata: ``producer_name``, ``graph_name``, ``domain``, ``description``,
    ``graph_description``, ``version``, ``custom_metadata_map``."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.producer_name: str = fields["producer_name"]
        self.graph_name: str = fields["graph_name"]
        self.domain: str = fields["domain"]
        self.description: str = fields["description"]
        self.graph_description: str = fields["graph_description"]
        self.version: int = fields["version"]
        self.custom_metadata_map: dict[str, str] = dict(fields["custom_metadata_map"])


def _provider_name(provider: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(provider, tuple):
        name, options = provider
        return str(name), dict(options or {})
    return str(provider), {}


def _parse_devices(devices: str | Sequence[str]) -> tuple[int, list[tuple[int, int]], list[int]]:
    """``["cpu:2", "cuda:0", "cuda:1:4", "virtual:2"]`` (or one comma-separated string) as
    (CPU lanes, [(GPU ordinal, streams)], [Virtual lanes])."""
    if isinstance(devices, str):
        devices = [d for d in devices.split(",") if d.strip()]
    cpu_lanes, cuda, virtual = 1, [], []
    for spec in devices:
        parts = str(spec).strip().lower().split(":")
        try:
            numbers = [int(p) for p in parts[1:]]
        except ValueError:
            raise ValueError(f"device '{spec}': expected cpu[:lanes], cuda[:ordinal[:streams]] or virtual[:lanes]") from None
        kind = parts[0]
        if kind == "cpu" and len(numbers) <= 1:
            cpu_lanes = numbers[0] if numbers else 1
        elif kind in ("cuda", "gpu") and len(numbers) <= 2:
            cuda.append((numbers[0] if numbers else 0, numbers[1] if len(numbers) > 1 else 1))
        elif kind == "virtual" and len(numbers) <= 1:
            virtual.append(numbers[0] if numbers else 1)
        else:
            raise ValueError(f"device '{spec}': expected cpu[:lanes], cuda[:ordinal[:streams]] or virtual[:lanes]")
    return cpu_lanes, cuda, virtual


class InferenceSession:
    """A loaded model, as onnxruntime's ``InferenceSession``.

    ``path_or_bytes``: a path (``str`` or ``os.PathLike``) or the bytes of an ONNX model.
    ``providers``: ``["CPUExecutionProvider"]`` (the default) or
    ``["CUDAExecutionProvider", ...]`` (optionally ``("CUDAExecutionProvider", {"device_id":
    1})``), which runs on a Spillway GPU and raises :class:`EPFail` when there is none:
    Spillway never falls back to the CPU silently. Spillway's own keyword arguments:
    ``devices`` (``["cpu:2", "cuda:0:2", "virtual:1"]``: CPU lanes, GPUs with their streams,
    CPU-backed Virtual devices) and ``placement`` (a policy name; see
    :func:`placement_policies`).

    ``run`` may be called from many threads at once on one session; the GIL is released
    while the engine computes.
    """

    def __init__(
        self,
        path_or_bytes: str | bytes | os.PathLike,
        sess_options: SessionOptions | None = None,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
        *,
        devices: str | Sequence[str] | None = None,
        placement: str | None = None,
        **kwargs: Any,
    ) -> None:
        self._source = path_or_bytes
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._devices = devices
        self._placement = placement
        self._create(providers, provider_options)

    def _create(self, providers: Sequence[Any] | None, provider_options: Sequence[Mapping[str, Any]] | None) -> None:
        """Creates the native session for `providers` (the session options and Spillway's own
        arguments as given to the constructor)."""
        options = self._sess_options
        devices = self._devices
        cpu_lanes, cuda, virtual = _parse_devices(devices) if devices is not None else (1, [], [])
        if devices is None and options.execution_mode == ExecutionMode.ORT_PARALLEL:
            cpu_lanes = max(1, int(options.inter_op_num_threads or 1))
        requested = [_provider_name(p) for p in (providers or [])]
        if provider_options is not None:
            if len(provider_options) != len(requested):
                raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
            requested = [(name, {**opts, **dict(extra)}) for (name, opts), extra in zip(requested, provider_options)]
        for name, opts in requested:
            if name == CUDA:
                if not cuda:
                    cuda.append((int(opts.get("device_id", 0)), int(opts.get("spillway_streams", 1))))
            elif name != CPU:
                raise ValueError(
                    f"Specified provider '{name}' is not in available provider names."
                    f"Available providers: '{', '.join(get_available_providers())}'"
                )
        source = self._source
        if isinstance(source, (bytearray, memoryview)):
            source = bytes(source)
        self._profile_prefix = options.profile_file_prefix
        self._profiling_start_ns = time.time_ns() if options.enable_profiling else 0
        self._native = _spillway.NativeSession(
            source,
            intra_op_threads=int(options.intra_op_num_threads or 0) or None,
            optimization={0: 0, 1: 1}.get(int(options.graph_optimization_level), 2),
            cpu_lanes=cpu_lanes,
            cuda=cuda,
            virtual_lanes=virtual,
            placement=self._placement,
            profiling=bool(options.enable_profiling),
        )
        self._inputs = [NodeArg(*i) for i in self._native.inputs()]
        self._outputs = [NodeArg(*o) for o in self._native.outputs()]

    def set_providers(
        self,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Re-creates the session on other execution providers (``RuntimeError`` for one that
        Spillway does not know)."""
        for provider in providers or []:
            name, _ = _provider_name(provider)
            if name not in get_all_providers():
                raise Fail(f"Unknown Provider Type: {name}")
        self._create(providers, provider_options)

    def get_inputs(self) -> list[NodeArg]:
        """The model's inputs, in order."""
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs, in order."""
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        """Initializers that can be fed as inputs: none in Spillway."""
        return []

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata."""
        return ModelMetadata(self._native.metadata())

    def get_providers(self) -> list[str]:
        """The execution providers the session runs on: the CUDA one first when it has a GPU."""
        devices = self._native.devices()
        return ([CUDA] if any(d.startswith("cuda") for d in devices) else []) + [CPU]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        """Per provider, its options (Spillway reports the devices it runs on)."""
        return {p: {} for p in self.get_providers()}

    def get_session_options(self) -> SessionOptions:
        """The options the session was created with."""
        return self._sess_options

    def devices(self) -> list[str]:
        """Spillway: the devices the session runs on (``cpu``, ``cuda0``, ``virtual0``)."""
        return list(self._native.devices())

    def placement_report(self) -> dict[str, Any] | None:
        """Spillway: where each node runs (``nodes``: (node, op type, device, lane)), the
        policy and the predicted makespan; ``None`` for a one-lane CPU session."""
        return self._native.placement_report()

    def gantt_svg(self) -> str | None:
        """Spillway: the schedule drawn as an SVG Gantt chart; ``None`` for a one-lane CPU
        session."""
        return self._native.gantt_svg()

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None = None,
    ) -> list[Any]:
        """Runs the model and returns the outputs named in ``output_names`` (all when ``None``
        or empty), as NumPy arrays (lists of arrays for sequences, ``None`` for an empty
        optional)."""
        if not isinstance(input_feed, dict):
            input_feed = dict(input_feed)
        names = list(output_names) if output_names else None
        return self._native.run(names, input_feed)

    def run_async(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        callback: Any,
        user_data: Any,
        run_options: RunOptions | None = None,
    ) -> None:
        """Runs on another thread and calls ``callback(outputs, user_data, error)`` when done
        (``error`` is ``""`` on success, the exception's message otherwise)."""

        def work() -> None:
            try:
                outputs = self.run(output_names, input_feed, run_options)
            except Exception as e:  # noqa: BLE001 - handed to the callback
                callback([], user_data, str(e))
            else:
                callback(outputs, user_data, "")

        threading.Thread(target=work, daemon=True).start()

    def get_profiling_start_time_ns(self) -> int:
        """When profiling began (``time.time_ns()`` at session creation), 0 when it is off."""
        return self._profiling_start_ns

    def end_profiling(self) -> str:
        """Writes the Chrome trace of the runs since profiling began (or since the last
        call) to ``<profile_file_prefix>_<date>_<time>.json`` and returns the file's name;
        ``""`` when profiling is off. Open it in Perfetto or chrome://tracing."""
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
        path = f"{self._profile_prefix}_{stamp}.json"
        return path if self._native.end_profiling(path) else ""

    def disable_fallback(self) -> None:
        """Spillway never falls back to another device: nothing to disable."""

    def enable_fallback(self) -> None:
        """Spillway never falls back to another device silently: refused."""
        raise Fail("Spillway does not fall back from a missing device; choose the devices explicitly")


__all__ = [
    "InferenceSession",
    "SessionOptions",
    "RunOptions",
    "NodeArg",
    "ModelMetadata",
    "GraphOptimizationLevel",
    "ExecutionMode",
    "get_available_providers",
    "get_all_providers",
    "get_device",
    "get_version_string",
    "get_build_info",
    "placement_policies",
    *_errors.__all__,
]
