"""Count one training step of a network on the meta device (shapes only, no weights): per
aten op its FLOPs, the bytes it reads and writes, and the elements it touches, classed as
matmul (convolutions, matrix products, attention) or elementwise (norms, activations,
pooling, adds, copies, the loss), then split into what grows with the batch (per image) and
what does not (weights read, weight gradients written: per step).

Bytes are what PyTorch moves running the step eagerly, op by op: every tensor argument read
once, every output written once, views free. A fused stack (inductor, MLPerf's kernels)
moves fewer; its fitted bandwidth efficiency says how many fewer. Convolution FLOPs honour
``groups`` (torch's flop counter ignores them in the backward). The performance model reads
the stored table (finetune.estimate.perf.traffic), which scripts/count_train_traffic.py writes,
and asks the runtime (count_step) for a network the table lacks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

aten = torch.ops.aten
MATMUL = {
    aten.convolution.default, aten.convolution_backward.default, aten.mm.default,
    aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_efficient_attention_backward.default,
    aten._scaled_dot_product_flash_attention_backward.default,
}  # fmt: skip
FREE = {  # allocate or re-label memory: no kernel moves data
    aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
    aten.new_empty.default, aten.new_empty_strided.default, aten._unsafe_view.default,
    aten.detach.default, aten.lift_fresh.default, aten.alias.default,
}  # fmt: skip
BATCHES = (8, 16)  # two batches: bytes = batch x per image + per step, solved per op
SGD_MOMENTUM = 20  # bytes per parameter per step: read w, g, m; write w, m (fp32)
AMP_CASTS = 12  # bytes per parameter per step: w fp32 -> half (4 + 2), grad half -> fp32 (2 + 4)
DTYPES = {"fp32": torch.float32, "mixed": torch.bfloat16}  # fp16 moves bf16's bytes
COUNTER = "finetune.estimate.perf.traffic_count (meta device, eager op by op)"


@dataclass(frozen=True)
class Op:
    """One aten op of a step."""

    name: str
    matmul: bool
    flops: float
    nbytes: float  # read + written
    elements: float  # read + written (the vector work of an elementwise op)


@dataclass(frozen=True)
class Step:
    """One training step's ops, summed per class: per image, and per step."""

    matmul_flops: float  # per image
    matmul_bytes: float  # per image
    elementwise_bytes: float  # per image
    elementwise_elements: float  # per image
    weight_bytes: float  # per step: weights read, weight gradients written
    kernels: int  # ops per step that move data (each a kernel launch, at least)


def _bytes(t: torch.Tensor) -> int:
    """Bytes a kernel touches for ``t``: its elements, or its storage when smaller (an
    expanded tensor reads its one copy)."""
    logical = t.numel() * t.element_size()
    try:
        return min(logical, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return logical


def _conv_flops(x: torch.Tensor, w: torch.Tensor, out_spatial: int) -> float:
    """2 x multiply-adds of a (grouped) convolution: each output element sums Cin/groups x
    kernel taps (the weight's second dimension is already Cin/groups)."""
    return 2.0 * x.shape[0] * w.shape[0] * out_spatial * w.shape[1] * math.prod(w.shape[2:])


def _flops(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> float:
    if func is aten.convolution.default:
        return _conv_flops(args[0], args[1], math.prod(out.shape[2:]))
    if func is aten.convolution_backward.default:
        grad, x, w, mask = args[0], args[1], args[2], args[10]
        one = _conv_flops(x, w, math.prod(grad.shape[2:]))
        return one * (int(mask[0]) + int(mask[1]))  # input and weight gradient: a conv each
    formula = flop_registry.get(func._overloadpacket)
    return 0.0 if formula is None else float(formula(*args, **kwargs, out_val=out))


def _is_view(func: Any) -> bool:
    returns = func._schema.returns
    return bool(returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns
    )


class _Tally(TorchDispatchMode):
    """Records every aten op that runs under it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[Op] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in FREE or _is_view(func):
            return out
        ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        touched = [*ins, *outs]  # an in-place op's output is its input: read and written
        matmul = func in MATMUL
        self.ops.append(
            Op(
                str(func.overloadpacket.__name__),
                matmul,
                _flops(func, args, kwargs, out) if matmul else 0.0,
                float(sum(_bytes(t) for t in touched)),
                float(sum(_bytes(t) / t.element_size() for t in touched)),
            )
        )
        return out


def step_ops(net: torch.nn.Module, image_size: int, batch: int, dtype: torch.dtype) -> list[Op]:
    """The ops of one forward + backward of ``net`` on meta tensors in ``dtype``,
    channels_last (as the torch engine trains), at ``batch`` images."""
    net = net.to(device="meta", dtype=dtype).to(memory_format=torch.channels_last).train()
    x = torch.empty(batch, 3, image_size, image_size, device="meta", dtype=dtype)
    x = x.contiguous(memory_format=torch.channels_last)  # the batch as it arrives: not counted
    tally = _Tally()
    with tally:
        net(x).float().sum().backward()
    for p in net.parameters():
        p.grad = None
    return tally.ops


def count(net: torch.nn.Module, image_size: int, dtype: torch.dtype) -> Step:
    """One step of ``net`` at ``image_size`` in ``dtype``, per image and per step: counted at
    two batches, each op's bytes solved as batch x per image + per step."""
    (b1, small), (b2, large) = ((b, step_ops(net, image_size, b, dtype)) for b in BATCHES)
    if [o.name for o in small] != [o.name for o in large]:
        raise RuntimeError("the op sequence changed with the batch: cannot split it")
    totals = {"mf": 0.0, "mb": 0.0, "eb": 0.0, "ee": 0.0, "w": 0.0}
    for a, b in zip(small, large, strict=True):
        img = max(0.0, (b.nbytes - a.nbytes) / (b2 - b1))
        totals["w"] += max(0.0, a.nbytes - b1 * img)
        if a.matmul:
            totals["mf"] += b.flops / b2
            totals["mb"] += img
        else:
            totals["eb"] += img
            totals["ee"] += max(0.0, (b.elements - a.elements) / (b2 - b1))
    return Step(totals["mf"], totals["mb"], totals["eb"], totals["ee"], totals["w"], len(large))


def row(name: str, net: torch.nn.Module, image_size: int, label: str) -> tuple[object, ...]:
    """One train_traffic.csv row of ``net`` (named ``name``) at ``image_size`` in precision
    class ``label``; the optimizer's update counted from the parameters (SGD with momentum,
    plus AMP's weight casts in half precision)."""
    params = sum(p.numel() for p in net.parameters())
    s = count(net, image_size, DTYPES[label])
    per_param = SGD_MOMENTUM + (AMP_CASTS if label == "mixed" else 0)
    return (
        name, image_size, label, params, f"{s.matmul_flops / 1e9:.3f}",
        f"{s.matmul_bytes / 1e6:.2f}", f"{s.elementwise_bytes / 1e6:.2f}",
        f"{s.elementwise_elements / 1e6:.2f}", f"{s.weight_bytes / 1e6:.2f}",
        f"{params * per_param / 1e6:.2f}", s.kernels, COUNTER, torch.__version__,
    )  # fmt: skip
