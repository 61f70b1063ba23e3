"""The PyTorch engine on CPU: it learns through both data paths, holds the preprocessing
contract, resumes exactly, stops cleanly, loads torchvision weights safely, and refuses bad
input with a clear error."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from PIL import Image  # noqa: E402

from finetune.contracts.container import Layout  # noqa: E402
from finetune.contracts.metrics import read as read_metrics  # noqa: E402
from finetune.data.datasets import prepare_folder  # noqa: E402
from finetune.data.recordio import RecordReader, unpack_header  # noqa: E402
from finetune.engines.models import check_model  # noqa: E402
from finetune.errors import ConfigError, DataError  # noqa: E402
from finetune.train.engines.torch import RUNTIME, prefetch, validation  # noqa: E402
from finetune.train.engines.torch.resident import ImageStore  # noqa: E402
from finetune.train.engines.torch.streaming import RecordDataset  # noqa: E402
from finetune.train.layout import load_job  # noqa: E402
from finetune.train.preprocess import Preprocessing  # noqa: E402

from ...conftest import Output, hparams, make_tree, start_trainer, values  # noqa: E402
from ...layouts import generate_scales  # noqa: E402
from ...recount import recount  # noqa: E402


def thp(**overrides):
    """Test hyperparameters for the torch engine (torchvision names, SGD)."""
    base = dict(engine="torch", model="resnet18", loader_workers=0)
    base.update(overrides)
    return hparams(**base)


def metrics_of(root):
    return read_metrics(root / "output" / "data" / "metrics.jsonl")


# ---- learning, through both data paths ------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("path", ["resident", "stream"])
def test_learns_the_scale_classes_through_both_data_paths(tmp_path, path):
    images = generate_scales(tmp_path / "img", 32, 64)
    ds = tmp_path / "ds"
    prepare_folder(images, ds, "scales", dict(val_ratio=0.25, resize=64, quality=90))
    # 5 epochs, not 6: an epoch's accuracy does not depend on the epoch count (measured: the
    # runs of 3, 4 and 6 epochs agree epoch by epoch), and the last two of 5 are the margin
    # the last two of 6 had -- resident .458 .75 .583 .875 .875 (.875), stream .542 .625
    # .917 .958 .917 (.917); ~2.5 CPU-s less each
    hp = thp(num_classes=3, num_training_samples=72, epochs=5, data_path=path, loader_workers=1)
    root = make_tree(tmp_path / "ml", ds, hp)
    result = RUNTIME.fit(load_job(Layout(root)))
    events = metrics_of(root)
    assert result.stopped_by is None and len(events) == 5
    assert max(e.val_acc for e in events[-2:]) >= 0.7, [e.val_acc for e in events]  # chance 1/3
    assert [(a, n) for a, n in recount(root, ds, "scales")] == [
        (e.val_acc, e.val_count) for e in events
    ]
    record = json.loads((root / "output" / "data" / "run-record.json").read_text())
    assert record["engine"] == "torch" and record["data_path"] == path
    assert record["framework"]["torch"] == torch.__version__ and record["precision"] == "fp32"
    model_dir = root / "model"
    state = torch.load(model_dir / "model.pt", weights_only=True)
    assert state["fc.weight"].shape == (3, 512)
    assert Preprocessing.model_validate_json((model_dir / "preprocessing.json").read_text())


# ---- the preprocessing contract -------------------------------------------------------------
def _reference(ds, contract):
    tensors, labels = [], []
    with RecordReader(ds / "shapes_val.rec", ds / "shapes_val.idx") as reader:
        for key in reader.keys:
            header, payload = unpack_header(reader.read_key(key))
            tensors.append(contract.val_array(Image.open(io.BytesIO(payload))))
            labels.append(int(header.label))
    return np.stack(tensors), np.asarray(labels)


@pytest.mark.parametrize(("stored", "max_bound", "mean_bound"), [(37, 1e-5, 1e-6), (64, 0.1, 0.01)])
def test_resident_validation_tensors_match_the_reference(
    image_folder, tmp_path, stored, max_bound, mean_bound
):
    """The resident path (torchvision decode + antialiased bilinear resize + exact crop
    gather) against the Pillow reference. No resize: equal up to float rounding. A 1.73x
    shrink: torchvision's and Pillow's antialiasing filters agree to about a grey level
    (measured max 0.035 = 2 levels, mean 0.0013 after normalisation)."""
    from finetune.train.engines.torch import boxes

    ds = tmp_path / "ds"
    prepare_folder(image_folder, ds, "shapes", dict(train_per_class=10, resize=stored))
    contract = Preprocessing.from_hparams(thp(image_size=32))
    store = ImageStore.load(ds / "shapes_val.rec", ds / "shapes_val.idx", contract, "cpu")
    index = torch.arange(len(store))
    box = boxes.center(store.widths, store.heights, 32)
    got = store.crops(index, box, 32, torch.zeros(len(store), dtype=torch.bool)).numpy()
    mean = np.asarray(contract.mean, np.float32)[None, :, None, None]
    std = np.asarray(contract.std, np.float32)[None, :, None, None]
    got = (got - mean) / std
    ref, labels = _reference(ds, contract)
    np.testing.assert_array_equal(store.labels.numpy(), labels)
    diff = np.abs(got - ref)
    assert diff.max() <= max_bound and diff.mean() <= mean_bound, (diff.max(), diff.mean())
    # validation's own batches (the uint8 copy path, NHWC): the same tensors bit for bit
    batches = list(validation.resident_batches(store, contract))
    x = torch.cat([b for b, _ in batches])
    assert x.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(x.numpy(), got)


def test_streaming_samples_are_the_reference_itself(image_folder, tmp_path):
    ds = tmp_path / "ds"
    prepare_folder(image_folder, ds, "shapes", dict(train_per_class=10, resize=50))
    contract = Preprocessing.from_hparams(thp(image_size=32))
    data = RecordDataset(ds / "shapes_val.rec", ds / "shapes_val.idx", contract, False, 0)
    ref, labels = _reference(ds, contract)
    for i in (0, 17, 47):
        x, y = data[(i, 0)]  # uint8 HWC from the worker, normalised on the device
        assert x.dtype == torch.uint8 and x.shape == (32, 32, 3)
        np.testing.assert_array_equal(validation.to_input(x[None], contract)[0].numpy(), ref[i])
        assert y == labels[i]


def test_resident_training_crops_copy_pixels_and_flip(image_folder, tmp_path):
    """A random crop box of exactly image_size pixels samples pixel centres: the crop equals
    the slice of the resized image, mirrored where the flip says."""
    ds = tmp_path / "ds"
    prepare_folder(image_folder, ds, "shapes", dict(train_per_class=10, resize=50))
    contract = Preprocessing.from_hparams(thp(image_size=32))
    store = ImageStore.load(ds / "shapes_val.rec", ds / "shapes_val.idx", contract, "cpu")
    i, x0, y0 = 3, 5, 2
    box = torch.tensor([[x0, y0, x0 + 32, y0 + 32]], dtype=torch.float32)
    assert store.exact(torch.tensor([i]), box, 32)
    for flip in (False, True):
        got = store.crops(torch.tensor([i]), box, 32, torch.tensor([flip]))[0]
        h, w = int(store.heights[i]), int(store.widths[i])
        start = int(store.offsets[i])
        image = store.pixels[start : start + h * w * 3].view(h, w, 3).permute(2, 0, 1)
        want = image[:, y0 : y0 + 32, x0 : x0 + 32].to(torch.float32)
        torch.testing.assert_close(got, want.flip(-1) if flip else want, rtol=0, atol=0)
        copied = store.copies(torch.tensor([i]), box, 32, torch.tensor([flip]))[0]  # uint8 HWC
        torch.testing.assert_close(copied.permute(2, 0, 1).to(torch.float32), got, rtol=0, atol=0)
    # boxes the copy cannot serve: resampled (not 32 wide), fractional, or past the edge
    for bad in (
        [x0, y0, x0 + 40, y0 + 32],
        [x0 + 0.5, y0, x0 + 32.5, y0 + 32],
        [w - 31, 0, w + 1, 32],
    ):
        assert not store.exact(torch.tensor([i]), torch.tensor([bad], dtype=torch.float32), 32)


def test_without_cuda_the_prefetch_hands_every_batch_on_in_order():
    batches = [(torch.full((2,), float(k)), torch.tensor([k])) for k in range(5)]
    got = list(prefetch.ahead(iter(batches), torch.device("cpu")))
    assert [int(y) for _, y in got] == list(range(5)) and got[3][0] is batches[3][0]


def test_the_cpu_clock_tells_loader_wait_from_input_work_in_series():
    import time

    from finetune.train.engines.torch.telemetry import InputClock
    from finetune.train.telemetry import Telemetry

    cpu = torch.device("cpu")
    for loader in (True, False):
        t = Telemetry(precision="fp32")
        t.begin_epoch()
        t.start_timing()
        clock = InputClock(cpu, t, loader=loader)
        with clock.waiting():
            time.sleep(0.02)
        fields = t.epoch_fields(samples_per_sec=10.0, timed_seconds=0.1)
        waited, in_series = fields["input_wait_fraction"], fields["input_device_fraction"]
        blocked, computed = (waited, in_series) if loader else (in_series, waited)
        assert blocked >= 0.2 and computed == 0, (loader, fields)


# ---- resume, stop, kill -----------------------------------------------------------------------
# SIGTERM at the first step, a restart, the weights of an uninterrupted run bit for bit: one
# test through the product with every assertion this file had (the stop said, progress lines
# that parse, equal weights and accuracies), in tests/backends/local/test_signal_stop.py
# (test_sigterm_at_the_first_step_leaves_an_interrupted_run_that_resumes); the precision
# variants of the same proof are in test_precision.py.


@pytest.mark.slow
def test_sigkill_loses_at_most_one_interval(tmp_path, tiny_dataset, capsys):
    # the kill comes in epoch 0: 2 epochs are enough; 6 of its 10 batches too (the kill lands
    # after the 4th step, measured: at step 4, resumed from 3), so that the restarted run
    # trains and checkpoints 9 steps instead of 17: 10.4 -> 7.8 CPU-s for that process
    hp = thp(epochs=2, checkpoint_interval_s=0.5, max_batches_per_epoch=6)
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    out = Output(start_trainer(root, FINETUNE_LOG_EVERY="1"))
    out.wait_for(lambda: (root / "checkpoints").is_dir() and any(
        p.name.startswith("ckpt-") for p in (root / "checkpoints").iterdir()
    ))  # fmt: skip
    out.wait_for(lambda: sum(line.startswith("finetune-progress") for line in out.lines) >= 4)
    out.proc.send_signal(signal.SIGKILL)
    out.finish(timeout=30)
    steps_done = max(out.values("finetune-progress", "step"))
    # resumed in this process, not in a second trainer: all a resume reads is what the killed
    # trainer left on disk (the kill is the point; a resume in a fresh process is
    # test_signal_stop.py's); a trainer's start-up less: 25.7 -> 20.6 CPU-s (whole pytest)
    capsys.readouterr()
    assert RUNTIME.fit(load_job(Layout(root))).stopped_by is None
    assert (root / "model" / "model.pt").exists()  # what a trainer's exit 0 said
    (resumed_step,) = values(capsys.readouterr().out.splitlines(), "finetune-resume", "step")
    # a checkpoint every 0.5 s and every epoch: at most a few steps of ~0.2 s are lost
    assert steps_done - resumed_step <= 6, (steps_done, resumed_step)
    assert [e.epoch for e in metrics_of(root)] == [0, 1]


# ---- pretrained weights -------------------------------------------------------------------
def _torchvision_file(folder, model="resnet18", classes=1000, name=None):
    """A torchvision state_dict saved the way torch.hub names published files."""
    from torchvision import models

    torch.manual_seed(0)
    net = models.get_model(model, weights=None, num_classes=classes)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "tmp.pth"
    torch.save(net.state_dict(), tmp)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    path = folder / (name or f"{model}-{digest[:8]}.pth")
    tmp.rename(path)
    return path, net.state_dict(), digest


@pytest.mark.slow
def test_torchvision_weights_from_the_pretrained_channel_with_a_frozen_backbone(
    tmp_path, tiny_dataset
):
    hp = thp(epochs=1, max_batches_per_epoch=3, pretrained=True, freeze_backbone=True,
             optimizer="sgd", lr=0.5, lr_per_device=0.5)  # fmt: skip
    channels = ("train", "validation", "pretrained")
    root = make_tree(tmp_path / "ml", tiny_dataset, hp, channels)
    path, saved, digest = _torchvision_file(root / "input" / "data" / "pretrained")
    RUNTIME.fit(load_job(Layout(root)))
    trained = torch.load(root / "model" / "model.pt", weights_only=True)
    assert trained["fc.weight"].shape == (8, 512)
    for key, value in saved.items():
        if not key.startswith("fc."):  # weights and BatchNorm statistics alike
            assert torch.equal(trained[key], value), key
    record = json.loads((root / "output" / "data" / "run-record.json").read_text())
    assert record["pretrained"]["sha256"] == digest and record["pretrained"]["file"] == str(path)


def test_weights_from_torch_hubs_cache_are_found_and_checked(tmp_path, monkeypatch):
    from finetune.train.engines.torch import weights as wt

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    url = wt.published("resnet18")["IMAGENET1K_V1"]
    name = url.rsplit("/", 1)[-1]
    (wt.hub_dir()).mkdir(parents=True)
    (wt.hub_dir() / name).write_bytes(b"not the published bytes")
    found = wt.find_cached("resnet18", "", [wt.hub_dir()])
    assert found.path.name == name and found.variant == "IMAGENET1K_V1"
    with pytest.raises(DataError, match=r"damaged or altered: its sha256 .* is not the f37072fd"):
        wt.verify(found)
    # used, it is fetched again: here from conftest's closed local port, so it is refused
    with pytest.raises(DataError, match="fetching it again failed") as exc:
        wt.locate("resnet18", "", [wt.hub_dir()])
    assert f"To fix: delete {wt.hub_dir() / name}" in str(exc.value)


def test_bad_weight_files_get_clear_errors(tmp_path, tiny_dataset):
    from finetune.train.engines.torch import network
    from finetune.train.engines.torch import weights as wt

    path, _, digest = _torchvision_file(tmp_path / "w")
    good = wt.Found(path, None)
    with pytest.raises(DataError, match=r"not the 0{64} the recipe gives"):
        wt.verify(good, "0" * 64)
    assert wt.verify(good, digest.upper()) == digest
    # tampered after download: one byte changed, the name's hash prefix no longer holds
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match="damaged"):
        wt.verify(good)
    # another model's weights, and a file that is no state_dict (nor safe to unpickle)
    other, _, _ = _torchvision_file(tmp_path / "o", model="resnet34", name="mine.pth")
    with pytest.raises(DataError, match="do not fit resnet18"):
        network.build(thp(pretrained=True), wt.Found(other, None))
    evil = tmp_path / "evil.pth"
    torch.save({"fc.weight": object()}, evil)
    with pytest.raises(DataError, match="not a PyTorch state_dict file"):
        wt.load_state(wt.Found(evil, None))
    # nothing on disk: fetched by default, here from conftest's closed local port
    with pytest.raises(
        DataError, match=r"could not download http://127\.0\.0\.1:9/models/resnet18-"
    ):
        wt.locate("resnet18", "", [tmp_path / "nothing"])


# ---- bad input ------------------------------------------------------------------------------
def test_model_names_are_per_engine_with_a_did_you_mean():
    check_model("torch", "resnet50")
    with pytest.raises(ConfigError, match="is a mxnet model, but this recipe runs the torch"):
        check_model("torch", "resnet50_v1")
    with pytest.raises(ConfigError, match="is a torch model, but this recipe runs the mxnet"):
        check_model("mxnet", "resnet152")
    with pytest.raises(ConfigError, match=r"unknown model 'resnet51'.*Did you mean"):
        check_model("torch", "resnet51")


@pytest.mark.slow
def test_a_checkpoint_of_another_class_count_is_refused(tmp_path, tiny_dataset):
    from finetune.train.checkpoints import CheckpointDir

    root = make_tree(tmp_path / "ml", tiny_dataset, thp())
    state = {"model": "resnet18", "num_classes": 5, "epoch": 1, "step": 10}
    CheckpointDir(root / "checkpoints").save(lambda d: (d / "model.pt").write_bytes(b"x"), state)
    with pytest.raises(DataError, match="written for resnet18 with 5 classes"):
        RUNTIME.fit(load_job(Layout(root)))


def test_a_corrupt_record_fails_with_the_file_named(tmp_path, tiny_dataset):
    import shutil

    ds = tmp_path / "ds"
    shutil.copytree(tiny_dataset, ds)
    rec = ds / "shapes_val.rec"
    data = bytearray(rec.read_bytes())
    data[60:400] = bytes(340)  # the first image's JPEG header and tables zeroed
    rec.write_bytes(bytes(data))
    contract = Preprocessing.from_hparams(thp(image_size=32))
    with pytest.raises(DataError, match=r"shapes_val\.rec: an image record does not decode"):
        ImageStore.load(rec, ds / "shapes_val.idx", contract, "cpu")


@pytest.mark.slow  # a trainer process of its own: torch's import alone takes seconds
def test_the_trainer_process_reports_a_bad_model_name(tmp_path, tiny_dataset):
    """A hyperparameters.json naming a model the torch engine cannot build (written by hand or
    by another tool: the contract refuses to make one) fails the trainer cleanly."""
    root = make_tree(tmp_path / "ml", tiny_dataset, thp())
    config = root / "input" / "config" / "hyperparameters.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "model": "resnet50_v1"}))
    out = Output(start_trainer(root))
    assert out.finish(timeout=120) == 4, out.text()
    failure = (root / "output" / "failure").read_text()
    assert "is a mxnet model, but this recipe runs the torch engine" in failure
    assert "Traceback" not in failure and os.path.exists(root / "output" / "failure")


def test_cpu_threads_are_every_usable_core_unless_omp_num_threads_says(monkeypatch):
    """A run alone takes every core it may use; one told OMP_NUM_THREADS (parallel test
    workers, other jobs on the machine) takes that many and no more."""
    from finetune.train.engines.torch import hardware

    before = torch.get_num_threads()
    cpu = torch.device("cpu")
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        hardware.threads(cpu)
        assert torch.get_num_threads() == len(os.sched_getaffinity(0))
        hardware.threads(cpu, processes=len(os.sched_getaffinity(0)))
        assert torch.get_num_threads() == 1  # each process its share
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        hardware.threads(cpu)
        assert torch.get_num_threads() == 3
        monkeypatch.setenv("OMP_NUM_THREADS", "many")  # not a count: the default again
        hardware.threads(cpu)
        assert torch.get_num_threads() == len(os.sched_getaffinity(0))
    finally:
        torch.set_num_threads(before)
