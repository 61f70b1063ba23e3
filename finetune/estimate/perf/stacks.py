"""The software stack a throughput was measured with, or is predicted for: framework, data
pipeline, kind of loop, memory layout and compile. Efficiencies are fitted per stack
(fit.py), never per GPU: the same stack on another GPU differs only by the GPU's roofs.

Published rows say their stack (calibration.csv: framework, pipeline, kind; the layout from
their notes); gpu-check's rows are torch with channels_last, the engine's job (its data
path: resident or stream) or a plain torchvision loop on resident tensors (the stack timm's
channels_last benchmark also runs). A setup of finetune's own engine is that engine's stack.
A stack without any row takes the median of its nearest stacks (``GROUPS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from finetune.estimate.perf import calibration, measured
from finetune.estimate.perf.setup import Setup

# engine framework names (engines.registry) -> the calibration rows' Framework
_FRAMEWORK = {"torch": "pytorch", "mxnet": "mxnet"}


@dataclass(frozen=True, order=True)
class Stack:
    framework: str  # pytorch, mxnet, tensorflow
    pipeline: str  # synthetic, dali, cpu (published); resident, stream (finetune's engine)
    kind: str  # record, reference, plain (a plain loop), engine (finetune's job)
    layout: str  # nhwc, nchw
    compile: str = "eager"  # eager, inductor (torch.compile)

    def __str__(self) -> str:
        return "/".join((self.framework, self.pipeline, self.kind, self.layout, self.compile))


def _layout(memory_format: str) -> str:
    return "nhwc" if memory_format == "channels_last" else "nchw"


def of_row(row: calibration.Row) -> Stack:
    """A published row's stack."""
    return Stack(row.framework, row.pipeline, row.kind, _layout(row.layout))


def of_measured(row: measured.Row) -> Stack:
    """A gpu-check row's stack: the engine's job on its data path, or a plain loop."""
    if row.kind == "engine":
        return Stack("pytorch", row.data_path, "engine", _layout(row.layout), row.compile)
    return Stack("pytorch", "synthetic", "plain", _layout(row.layout), row.compile)


def of_setup(setup: Setup) -> Stack:
    """What a setup runs: its own stack where it names one (a published row), else its
    engine's, as the engine's descriptor says: an engine that keeps images decoded on the
    GPU (torch) is measured by gpu-check as its job (resident, or streamed when a decoder runs
    every epoch); one that decodes on the CPU every epoch (mxnet's ImageRecordIter) is the
    plain NCHW loop the MXNet study measured."""
    compiled = "inductor" if setup.compile else "eager"
    layout = _layout(setup.layout)
    if setup.framework is not None:
        return Stack(setup.framework, setup.pipeline_kind or "synthetic", setup.kind, layout,
                     compiled)  # fmt: skip
    engine = setup.engine
    framework = next((_FRAMEWORK[f] for f in engine.frameworks if f in _FRAMEWORK), "pytorch")
    if not engine.resident:
        return Stack(framework, "cpu", "plain", "nchw", "eager")
    path = "stream" if setup.decoder is not None else "resident"
    kind = "engine" if setup.kind == "plain" else setup.kind
    return Stack(framework, path, kind, layout, compiled)


Group = Callable[[Stack, Stack], bool]
# where a stack without rows borrows from, nearest first
GROUPS: tuple[tuple[str, Group], ...] = (
    ("the same framework, layout and compile",
     lambda a, b: (a.framework, a.layout, a.compile) == (b.framework, b.layout, b.compile)),
    ("the same framework", lambda a, b: a.framework == b.framework),
    ("every stack", lambda a, b: True),
)  # fmt: skip
