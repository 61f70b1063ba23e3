"""This process's hardware: which device, how many CPU threads, how much memory, the NVML
names of its GPUs and the datasheet peak the telemetry compares against."""

from __future__ import annotations

import logging
import os

import torch

from finetune.errors import ConfigError
from finetune.train import dataset
from finetune.train.preprocess import Preprocessing
from finetune.train.telemetry import Telemetry

log = logging.getLogger(__name__)


def device_type(kind: str) -> str:
    if kind == "gpu" and not torch.cuda.is_available():
        raise ConfigError(
            "device=gpu but PyTorch sees no CUDA GPU on this host",
            "run on a GPU instance with a CUDA build of torch, or set device=cpu.",
        )
    return "cuda" if kind != "cpu" and torch.cuda.is_available() else "cpu"


def device(kind: str, local_rank: int = 0) -> torch.device:
    if device_type(kind) == "cuda":
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


# networks measured faster in NCHW than channels_last on a CPU in fp32 (the ResNets of basic
# blocks): docs/decisions/006-cpu-memory-layout.md
CPU_NCHW_MODELS = frozenset({"resnet18", "resnet34"})


def memory_format(
    device: torch.device, precision: str = "fp32", model: str = ""
) -> torch.memory_format:
    """The layout of images and convolution weights for ``model``: channels_last (NHWC) on a
    GPU and on a CPU in bf16/fp16; NCHW for fp32 on a CPU where measured faster
    (CPU_NCHW_MODELS; docs/decisions/006-cpu-memory-layout.md)."""
    if device.type != "cuda" and precision == "fp32" and model in CPU_NCHW_MODELS:
        return torch.contiguous_format
    return torch.channels_last


def threads(device: torch.device, processes: int = 1) -> None:
    """This process's share of the cores for intra-op work on a CPU (importing mxnet first
    would leave one). An OMP_NUM_THREADS set by whoever started us wins: they know what else
    shares the machine (parallel test workers, other jobs)."""
    if device.type == "cpu":
        asked = os.environ.get("OMP_NUM_THREADS", "").strip()
        if asked.isdigit() and int(asked) > 0:
            torch.set_num_threads(int(asked))
            return
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
        torch.set_num_threads(max(cores // processes, 1))


def nvml_ids(count: int) -> list[str]:
    """NVML names (UUID, else PCI bus id) of CUDA devices 0..count-1 (none if torch does not
    say: the telemetry then goes without NVML)."""
    try:
        return [_nvml_id(i) for i in range(count)]
    except (AttributeError, RuntimeError) as exc:
        log.warning("no NVML names for the GPUs (%s)", exc)
        return []


def _nvml_id(i: int) -> str:
    props = torch.cuda.get_device_properties(i)
    uuid = getattr(props, "uuid", None)
    if uuid:
        return f"GPU-{uuid}"
    # torch's stub of _CudaDeviceProperties lacks the pci_* fields the object has at runtime
    domain, bus, dev = props.pci_domain_id, props.pci_bus_id, props.pci_device_id  # type: ignore[attr-defined]
    return f"{domain:08X}:{bus:02X}:{dev:02X}.0"


def peak_record(telemetry: Telemetry) -> dict | None:
    peak = telemetry.peak
    if peak is None:
        return None
    return {"model": peak.model, "tflops": peak.tflops(telemetry.precision),
            "precision": telemetry.precision, "source": peak.source}  # fmt: skip


def decoded_bytes(files: dataset.DatasetFiles, contract: Preprocessing) -> int:
    """Decoded size of every split at the contract's resize (4:3 images assumed)."""
    images = sum(s.count for s in files.manifest.splits.values())
    side = contract.resize_shorter
    return int(images * side * side * 4 / 3 * 3)


def memory(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


LOADER_SPARE_CORES = 2  # the training thread (launches kernels) and the pin-memory thread


def loader_workers(asked: int) -> int:
    """``asked`` loader processes, or (-1) every core but LOADER_SPARE_CORES, at least one:
    with one worker per core the first GPU run's stream path starved its own main thread
    (compute rate 0.95x of the bare loop's)."""
    if asked >= 0:
        return asked
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(cores - LOADER_SPARE_CORES, 1)
