"""The GPU code paths on a CPU: bf16 autocast, fp16 autocast with the gradient scaler, fused
SGD and torch.compile run end to end with the real trainer -- each learns, checkpoints and
resumes to the weights of an uninterrupted run."""

from __future__ import annotations

import json
import signal

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from finetune.contracts.container import EXIT_STOPPED, Layout  # noqa: E402
from finetune.contracts.metrics import read as read_metrics  # noqa: E402
from finetune.train.engines.torch import RUNTIME  # noqa: E402
from finetune.train.layout import load_job  # noqa: E402

from ...conftest import Output, hparams, make_tree, start_trainer  # noqa: E402
from ...layouts import generate_brightness  # noqa: E402
from ...recount import recount  # noqa: E402

# 16 validation images of 2 classes: a model that guesses gets 15 or 16 right with
# probability 17 / 2**16 (< 3e-4); one class for everything gets 8
LEARNED = 15 / 16


@pytest.fixture(scope="module")
def bright(tmp_path_factory):
    """Dark and bright noise, 20 images a class at 40 px: 24 training, 16 validation."""
    from finetune.data.datasets import prepare_folder

    images = generate_brightness(tmp_path_factory.mktemp("bright") / "img", 20, 40)
    out = tmp_path_factory.mktemp("bright") / "ds"
    params = dict(train_per_class=12, resize=40, quality=90)
    prepare_folder(images, out, "bright", params, workers=1)
    return out


def gpu_hp(**overrides):
    """The recipes' optimizer (SGD, momentum 0.9) on resnet18 at 32 px, two classes; the
    batch norms keep their initial statistics, so that validation after a few steps
    measures the weights learnt (running statistics take tens of steps to settle)."""
    base = dict(engine="torch", model="resnet18", loader_workers=0, optimizer="sgd",
                momentum=0.9, lr=0.005, lr_per_device=0.005, epochs=2, num_classes=2,
                num_training_samples=24, top_k=1, batchnorm="frozen",
                checkpoint_interval_s=3600)  # fmt: skip
    base.update(overrides)
    return hparams(**base)


@pytest.fixture
def one_compile_thread(monkeypatch):
    """Inductor compiles in the process that asks, not in a pool of compile workers: each
    worker imports torch (seconds of CPU) in every process that compiles -- here the test's
    own and both trainers' -- for kernels that inductor's cache mostly already holds. The
    compile itself (Dynamo, AOTAutograd, inductor) still runs in full; measured 80.6 -> 48.9
    CPU-s for [compile] on 2 cores."""
    from torch._inductor import config

    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")  # the trainers read it at import
    # this process imported it already: inductor's own patch (monkeypatch's undo left the
    # config module without the entry, and the next test's setup failed)
    with config.patch(compile_threads=1):
        yield


@pytest.mark.parametrize(("batch", "cin", "cout"), [(1, 64, 8), (2, 16, 16), (8, 256, 512)])
def test_bf16_weight_gradients_of_a_strided_conv_of_one_pixel_are_exact_on_a_cpu(batch, cin, cout):
    # the geometry oneDNN's bf16 backward gets wrong on AVX512 CPUs (precision.backward): only
    # the centre tap meets the pixel, so its gradient is sum_n grad_out[n,o] * x[n,i] and
    # every other tap's is exactly 0; bf16 rounds the centre's to 8 bits (<= 1 % of the largest)
    from finetune.train.engines.torch import precision

    gen = torch.Generator().manual_seed(batch)
    for layout in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(batch, cin, 1, 1, generator=gen).bfloat16()
        w = torch.randn(cout, cin, 3, 3, generator=gen).bfloat16()
        w = w.contiguous(memory_format=layout).requires_grad_()
        grad_out = torch.randn(batch, cout, 1, 1, generator=gen).bfloat16()
        out = torch.nn.functional.conv2d(x.contiguous(memory_format=layout), w, stride=2, padding=1)
        with precision.backward("bf16", torch.device("cpu")):
            out.backward(grad_out)
        exact = torch.zeros(cout, cin, 3, 3, dtype=torch.float64)
        exact[:, :, 1, 1] = grad_out.double().flatten(1).T @ x.double().flatten(1)
        got = w.grad.double()
        side = got.clone()
        side[:, :, 1, 1] = 0
        assert torch.count_nonzero(side) == 0, (layout, side.abs().max())
        scale = float(exact.abs().max())
        assert torch.allclose(got, exact, rtol=0, atol=0.01 * scale), (
            layout,
            (got - exact).abs().max(),
        )
    assert torch.backends.mkldnn.enabled  # the context gave oneDNN back


def _weights(root):
    return torch.load(root / "model" / "model.pt", weights_only=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("asked", "compiled"),
    [("bf16", False), ("fp16", False), ("fp32", True)],
    ids=["bf16", "fp16-scaler", "compile"],
)
def test_gpu_code_paths_learn_checkpoint_and_resume_on_a_cpu(
    tmp_path, bright, asked, compiled, one_compile_thread, capsys
):
    # 16 px, not the recipes' 32: the code paths are the point, and autocast's CPU kernels
    # cost per pixel (a bf16 step 0.50 -> 0.29 CPU-s); measured at 16 px: 16/16 after each
    # epoch in each variant (seeded runs: the same every time; at 32 px fp16's first had 8/16)
    hp = gpu_hp(precision=asked, compile=compiled, image_size=16)
    plain = make_tree(tmp_path / "plain", bright, hp)
    RUNTIME.fit(load_job(Layout(plain)))
    # learns: accuracy recounted from the saved predictions and the .lst labels
    accuracies = [a for a, _ in recount(plain, bright, "bright")]
    assert accuracies[-1] >= LEARNED, accuracies

    # a trainer process stopped by SIGTERM after its first step, checkpointed, then resumed
    root = make_tree(tmp_path / "stopped", bright, hp)
    first = Output(start_trainer(root, FINETUNE_LOG_EVERY="1"))
    first.wait_for(lambda: any(line.startswith("finetune-progress") for line in first.lines))
    first.proc.send_signal(signal.SIGTERM)
    assert first.finish(timeout=300) == EXIT_STOPPED, first.text()  # unfinished, resumable
    assert "stopped by SIGTERM" in first.text()
    said = f"precision={asked} on a CPU: autocast" if asked != "fp32" else "compile=true on a CPU"
    assert said in first.text(), first.text()  # the slow path is said, in the trainer's output
    (checkpoint,) = [p for p in (root / "checkpoints").iterdir() if p.name.startswith("ckpt-")]
    scaler = torch.load(checkpoint / "optimizer.pt", weights_only=True)["scaler"]
    assert (scaler.get("scale", 0.0) > 0) == (asked == "fp16"), scaler  # fp16 keeps its scale
    # resumed here, not in a second trainer: all a resume reads is the checkpoint on disk that
    # the stopped trainer wrote (a resume in a fresh process: test_signal_stop.py,
    # test_ddp.py); [bf16] measured 25.2 -> 20.6 CPU-s. [compile]: Dynamo forgets what this
    # process compiled for `plain` (torch._dynamo.reset), so the resumed network is compiled
    # afresh, as in a resumed run's process -- and the count of compiled graphs says it was;
    # the fresh-process compile is the stopped trainer's. Measured (OMP_NUM_THREADS=1, warm
    # inductor cache, 2-core EPYC): a second trainer 10-11 CPU-s, this resume 3.4 (2.9
    # without the reset)
    from torch._dynamo.utils import counters

    if compiled:
        torch._dynamo.reset()
    graphs = counters["stats"]["unique_graphs"]
    capsys.readouterr()
    assert RUNTIME.fit(load_job(Layout(root))).stopped_by is None
    resumed = capsys.readouterr().out
    assert (counters["stats"]["unique_graphs"] > graphs) == compiled
    assert "finetune-resume" in resumed

    a, b = _weights(plain), _weights(root)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    metrics = read_metrics(root / "output" / "data" / "metrics.jsonl")
    assert [a for a, _ in recount(root, bright, "bright")] == accuracies
    assert [e.val_acc for e in metrics] == accuracies
    record = json.loads((root / "output" / "data" / "run-record.json").read_text())
    assert record["precision"] == asked and record["device_kind"] == "cpu"
    # the layout this precision trains fastest in on a CPU (hardware.memory_format: autocast's
    # step 5.6-6.3x as long in NCHW, fp32's 1.3-1.5x as long in channels_last at 32 px), on
    # the weights themselves: a saved tensor keeps its strides
    layout = torch.channels_last if asked != "fp32" else torch.contiguous_format
    assert record["layout"] == ("nchw" if asked == "fp32" else "channels_last")
    assert a["conv1.weight"].is_contiguous(memory_format=layout)
    assert a["conv1.weight"].is_contiguous() == (asked == "fp32")


def test_auto_precision_is_fp32_on_a_cpu_and_explicit_ones_are_kept():
    from finetune.train.engines.torch import precision

    cpu = torch.device("cpu")
    assert precision.choose("auto", cpu) == "fp32"
    assert [precision.choose(p, cpu) for p in ("fp32", "bf16", "fp16")] == ["fp32", "bf16", "fp16"]
    assert not precision.scaler("bf16", cpu).is_enabled()
    assert precision.scaler("fp16", cpu).is_enabled()


def test_the_optimizer_is_fused_on_a_cpu_and_its_rate_comes_from_the_schedule():
    from finetune.train.engines.torch import precision

    net = torch.nn.Linear(3, 2)
    for name in ("sgd", "nag", "adam"):
        hp = hparams(engine="torch", model="resnet18", optimizer=name, momentum=0.9)
        opt = precision.optimizer([{"params": list(net.parameters()), "lr_mult": 1.0}], hp)
        assert opt.defaults["fused"] is True and opt.param_groups[0]["lr"] == 0.0, name
