"""The performance model against figures computed here by hand from the bundled CSV rows
(calibration.csv, gpu_peaks.csv, train_flops.csv, interconnect.csv), and the leave-one-out
backtest with its stated bound."""

from __future__ import annotations

import csv
import statistics
from importlib import resources

import pytest

from finetune.estimate.perf import backtest, calibration, flops, mfu, multihost, throughput

MIXED = ("fp16", "bf16", "amp")
DENSE = ("resnet", "wide_resnet", "vit", "swin", "swin_v2")  # families without grouped convs


def _csv(name: str, package: str) -> list[dict]:
    with resources.files(package).joinpath(name).open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


CAL = _csv("calibration.csv", "finetune.catalog")
PEAKS = {r["GpuModel"]: r for r in _csv("gpu_peaks.csv", "finetune.catalog")}
FLOPS = {
    (r["Network"], int(r["ImageSize"])): r
    for r in _csv("train_flops.csv", "finetune.estimate.perf")
}
LINKS = {r["Family"]: r for r in _csv("interconnect.csv", "finetune.estimate.perf")}


def gflops(network: str, size: int) -> float:
    """What the model charges: the counted figure, or 3 x forward where the row says so."""
    r = FLOPS[(network, size)]
    return float(r["ThreeXForwardGflops"] if r["Notes"] else r["TrainGflops"])


def peak(gpu: str, precision: str) -> float:
    r = PEAKS[gpu]
    if precision in MIXED and (r["DenseBf16Tflops"] or r["DenseFp16Tflops"]):
        return float(r["DenseBf16Tflops"] or r["DenseFp16Tflops"])
    return float(r["DenseTf32Tflops"] or r["Fp32Tflops"])


def all_but(*keep: str) -> frozenset[str]:
    return frozenset(r["Id"] for r in CAL if r["Id"] not in keep)


def row(row_id: str) -> dict:
    return next(r for r in CAL if r["Id"] == row_id)


def test_flop_table_covers_the_recipes_and_shows_three_x_forward():
    recipes = [("resnet18", 32), ("resnet50", 224), ("resnet152", 224)]  # the bundled recipes
    others = [("convnext_tiny", 224), ("efficientnet_v2_s", 224), ("vit_b_16", 224)]
    for net, size in recipes + others:
        r = FLOPS[(net, size)]
        assert "flop_counter" in r["Counter"] and r["TorchVersion"]
        assert flops.lookup(net, size).gflops == pytest.approx(gflops(net, size))
    for (_net, _size), r in FLOPS.items():
        counted, three_x = float(r["TrainGflops"]), float(r["ThreeXForwardGflops"])
        if r["Family"] in DENSE:  # no grouped convolutions
            assert counted == pytest.approx(three_x, rel=0.03) and not r["Notes"]
        else:  # depthwise convolutions: the counter's backward ignores groups
            assert counted > 1.1 * three_x and "3 x forward" in r["Notes"]
    assert flops.lookup("resnet50_v1", 224).network == "resnet50"  # GluonCV's name
    assert flops.lookup("imagenet11k-resnet-152", 224).network == "resnet152"


def test_every_model_of_the_torch_engine_is_counted_at_its_own_and_the_recipes_sizes():
    from finetune.engines import backbones
    from finetune.recipes.loading import BUILTIN_DIR, load_recipe

    for name, row in backbones.TABLE.items():
        for size in {row.crop, 224} - ({224} if row.multiple_of > 224 else set()):
            assert FLOPS[(name, size)]["Family"] == row.family, (name, size)
    for path in BUILTIN_DIR.glob("*.yaml"):
        recipe = load_recipe(path.stem)
        if recipe.engine == "torch":
            key = (recipe.model.name, recipe.data.image_size)
            assert key in FLOPS and flops.lookup(*key).gflops == pytest.approx(gflops(*key))


def test_a_small_models_row_is_what_torchs_flop_counter_counts():
    """MobileNetV3-Small at 224 px (depthwise convolutions: the row says the counter overcounts
    their backward and the model charges 3 x forward), counted here (batch 2) by
    torch.utils.flop_counter.FlopCounterMode around one forward and one backward: the row's
    training and forward GFLOPs per image, and its 3 x forward."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    from torchvision import models

    net = models.get_model("mobilenet_v3_small", weights=None)
    params = sum(p.numel() for p in net.parameters())
    net = net.to("meta")  # shapes are all a FLOP count needs (real tensors: ~10x slower)
    x = torch.empty(2, 3, 224, 224, device="meta")
    with FlopCounterMode(display=False) as forward, torch.no_grad():
        net.eval()(x)
    with FlopCounterMode(display=False) as train:
        net.train()(x).sum().backward()
    r = FLOPS[("mobilenet_v3_small", 224)]
    assert float(r["TrainGflops"]) == pytest.approx(train.get_total_flops() / 2e9, abs=5e-4)
    assert float(r["ForwardGflops"]) == pytest.approx(forward.get_total_flops() / 2e9, abs=5e-4)
    assert float(r["ThreeXForwardGflops"]) == pytest.approx(3 * float(r["ForwardGflops"]), abs=2e-3)
    assert int(r["Parameters"]) == params
    assert flops.lookup("mobilenet_v3_small", 224).gflops == float(r["ThreeXForwardGflops"])


def test_a_family_without_calibration_rows_takes_other_networks_mfu_with_a_wider_band():
    """Only timm's RTX 3090 ResNet-50 row left: Swin-T (no Swin row anywhere) gets the MFU
    that row implies (same GPU, other networks: band +-20 %), charged at Swin-T's own FLOPs,
    and the band widens by a further +-25 %. ConvNeXt-T, whose family has rows, does not."""
    kept = "timm-rtx3090-nhwc-resnet50"
    r = row(kept)
    by_hand = float(r["ImagesPerSec"]) * gflops("resnet50", 224) / gflops("swin_t", 224)
    p = throughput.predict(
        throughput.Setup("swin_t", "RTX 3090", "fp16", 64), exclude=all_but(kept)
    )
    assert p.images_per_sec == pytest.approx(by_hand, rel=1e-9) and p.level == 2
    assert (p.low, p.high) == pytest.approx((0.8 * 0.75 * by_hand, 1.2 * 1.25 * by_hand))
    assert p.wider_band and any("no calibration row of the swin family" in b for b in p.basis)
    c = throughput.predict(
        throughput.Setup("convnext_tiny", "RTX 3090", "fp16", 64), exclude=all_but(kept)
    )
    by_hand = float(r["ImagesPerSec"]) * gflops("resnet50", 224) / gflops("convnext_tiny", 224)
    assert (c.low, c.high) == pytest.approx((0.8 * by_hand, 1.2 * by_hand), rel=1e-9)
    assert not c.wider_band


def test_every_single_device_row_implies_its_mfu_by_hand():
    checked = 0
    for r in calibration.rows():
        if r.devices != 1 or (flops.network_key(r.network), r.image_size) not in FLOPS:
            continue
        raw = row(r.id)
        by_hand = (
            float(raw["ImagesPerSec"]) * gflops(flops.network_key(r.network), r.image_size)
            * 1e9 / (peak(raw["GpuModel"], raw["Precision"]) * 1e12)
        )  # fmt: skip
        assert mfu.row_mfu(r) == pytest.approx(by_hand, rel=1e-9), r.id
        checked += 1
    assert checked >= 50


def test_same_architecture_transfers_by_peak_ratio():
    """Only timm's RTX 3090 ResNet-50 row left: an A10G (Ampere too) gets its MFU, i.e. the
    3090's images/s x the ratio of the two bf16/fp16 peaks; band +-25 %."""
    kept = "timm-rtx3090-nhwc-resnet50"
    p = throughput.predict(throughput.Setup("resnet50", "A10G", "bf16", 64), exclude=all_but(kept))
    by_hand = float(row(kept)["ImagesPerSec"]) * peak("A10G", "bf16") / peak("RTX 3090", "fp16")
    assert p.images_per_sec == pytest.approx(by_hand, rel=1e-9)
    assert (p.low, p.high) == pytest.approx((0.75 * by_hand, 1.25 * by_hand), rel=1e-9)
    assert p.level == 3 and not p.wider_band and kept in " ".join(p.basis)


def mfu_of(rid: str) -> float:
    """A single-device row's MFU by hand: images/s x GFLOP per image / dense peak."""
    r = row(rid)
    f = gflops(flops.network_key(r["Network"]), int(r["ImageSize"]))
    return float(r["ImagesPerSec"]) * f / (peak(r["GpuModel"], r["Precision"]) * 1e3)


def test_across_generations_by_the_same_source_tuned_ratio_and_a_reference_is_no_ceiling():
    """H100 has no plain-loop row in its generation: the 3090's plain MFU x (Lambda's H100
    MFU / Lambda's 3090 MFU). Lambda's reference H100 figure does not cap it: on the 3090
    the same plain row beats Lambda's (1,218 vs 905 img/s)."""
    plain, t3090, th100 = (
        "timm-rtx3090-nhwc-resnet50",
        "lambda-3090_v1-amp",
        ("lambda-h100_80gb_sxm5_v1-amp"),
    )
    gone = all_but(plain, t3090, th100)
    setup = throughput.Setup("resnet50", "H100", "bf16", 64)
    transferred = mfu_of(plain) * mfu_of(th100) / mfu_of(t3090)
    point, low, high, level, _rows, how = mfu.learn(setup, gone, tuned=False)
    assert (point, level) == (pytest.approx(transferred, rel=1e-9), 4)
    assert (low, high) == pytest.approx((0.6 * transferred, 1.4 * transferred), rel=1e-9)
    assert "RTX 3090" in how[0] and "Lambda" in how[0]
    assert f"x {mfu_of(th100) / mfu_of(t3090):.3f} from RTX 3090" in how[0]
    p = throughput.predict(setup, exclude=gone)
    by_hand = transferred * peak("H100 SXM", "bf16") * 1e3 / gflops("resnet50", 224)
    assert transferred > mfu_of(th100)  # above Lambda's H100 rate, and left there
    assert p.images_per_sec == pytest.approx(by_hand, rel=1e-9)
    assert p.wider_band and not any("bound the MFU" in line for line in p.basis)


def _two_gpu_record_mfu(rid: str, link_gbytes: float) -> float:
    """A 2-GPU row's MFU by hand: per-GPU rate / the scaling model's efficiency (ring over
    the link at 70 %, hidden by 2/3 of the step but the last 25 MiB bucket; straggler jitter
    0.03 -- the default where no 1-vs-n pair is left to fit it)."""
    r = row(rid)
    per_gpu, batch = float(r["ImagesPerSec"]) / 2, int(r["BatchPerDevice"])
    nbytes = 4 * int(FLOPS[("resnet50", 224)]["Parameters"])
    step = batch / per_gpu
    ring = 2 * 1 / 2 * nbytes / (link_gbytes * 1e9 * 0.7)
    exposed = max(ring - 2 / 3 * step, ring * 25 * 2**20 / nbytes)
    z2 = statistics.NormalDist().inv_cdf((2 - 0.375) / (2 + 0.25))
    eff = step / (step + exposed + step * 0.03 * z2)
    return per_gpu / eff * gflops("resnet50", 224) / (peak(r["GpuModel"], r["Precision"]) * 1e3)


def test_only_records_bound_a_plain_loop():
    """On the RTX 3090 the NHWC plain row stands above Lambda's reference row; an MLPerf
    record of its architecture (2 x A100 PCIe; the A100 80GB has no AWS family, so PCIe gen4
    at 31.5 GB/s) caps it at the record's MFU."""
    plain, ref, record = (
        "timm-rtx3090-nhwc-resnet50",
        "lambda-3090_v1-amp",
        "mlperfv21-fujitsu-rx_a100-pciex2_mxnet_ngc_22.04",
    )
    setup = throughput.Setup("resnet50", "RTX 3090", "fp16", 512)
    p = throughput.predict(setup, exclude=all_but(plain, ref))
    assert p.images_per_sec == pytest.approx(float(row(plain)["ImagesPerSec"]), rel=1e-9)
    top = _two_gpu_record_mfu(record, 31.5)
    assert top < mfu_of(plain)
    p = throughput.predict(setup, exclude=all_but(plain, ref, record))
    by_hand = top * peak("RTX 3090", "fp16") * 1e3 / gflops("resnet50", 224)
    assert (p.images_per_sec, p.high) == pytest.approx((by_hand, by_hand), rel=1e-9)
    assert any("record rows bound the MFU" in line and record in line for line in p.basis)


def test_a_plain_row_reaches_a100_and_h100_by_the_suite_that_measured_both():
    """The 3090's two plain ResNet-50 rows (NCHW, NHWC) x Lambda's MFU on the target GPU /
    on the 3090. A100 80GB: same architecture (level 3, +-25 %), Lambda's SXM4 and PCIe rows
    (their median is their mean); H100: another generation (level 4, +-40 %). Before this
    rule the A100 took the 3090's MFU by peak ratio and came out above the H100."""
    plains = ("timm-rtx3090-nchw-resnet50", "timm-rtx3090-nhwc-resnet50")
    t3090, a100s = "lambda-3090_v1-amp", ("lambda-a100_80gb_sxm4_v1-amp",
                                          "lambda-a100_80gb_pcie_v1-amp")  # fmt: skip
    h100 = "lambda-h100_80gb_sxm5_v1-amp"
    gone = all_but(*plains, t3090, *a100s, h100)
    f = gflops("resnet50", 224)
    want = {}
    for gpu, lam, level, margin in (("A100 80GB", a100s, 3, 0.25), ("H100 SXM", (h100,), 4, 0.4)):
        ratio = statistics.mean(mfu_of(t) for t in lam) / mfu_of(t3090)
        moved = [mfu_of(r) * ratio for r in plains]
        rate = statistics.mean(moved) * peak(gpu, "bf16") * 1e3 / f
        p = throughput.predict(throughput.Setup("resnet50", gpu, "bf16", 64), exclude=gone)
        assert (p.images_per_sec, p.level) == (pytest.approx(rate, rel=1e-9), level), gpu
        band = [m * peak(gpu, "bf16") * 1e3 / f for m in (min(moved), max(moved))]
        assert (p.low, p.high) == pytest.approx(
            (band[0] * (1 - margin), band[1] * (1 + margin)), rel=1e-9
        )  # fmt: skip
        assert any(f"carried to {gpu} by measured suite ratio" in line and "RTX 3090" in line
                   for line in p.basis), p.basis  # fmt: skip
        want[gpu] = rate
    assert want["A100 80GB"] < want["H100 SXM"]


@pytest.mark.parametrize("network", ["resnet50", "resnet152"])
def test_newer_gpus_rank_above_older_ones_for_a_torch_bf16_run(network):
    """All calibration rows: a plain PyTorch loop (finetune's torch engine) at bf16, batch 64,
    on 1 GPU and on a whole 8-GPU instance (p4d: A100 40GB; p5: H100; p5e: H200; p6-b200).
    B200: Lambda measured it level with the H200 for this loop (3,076 vs 3,079 img/s on one
    GPU), and the model carries that over -- equal within 1 %, not ahead."""
    for per_host, fams in ((1, (None,) * 5), (8, ("p4d", "p4d", "p5", "p5e", "p6-b200"))):
        gpus = ("A100", "A100 80GB", "H100", "H200", "B200")
        setups = [
            throughput.Setup(network, g, "bf16", 64, gpus_per_host=per_host, family=fam)
            for g, fam in zip(gpus, fams, strict=True)
        ]
        rate = {s.gpu_model: throughput.predict(s).images_per_sec for s in setups}
        assert max(rate["A100"], rate["A100 80GB"]) < rate["H100"] < rate["H200"], rate
        assert rate["B200"] == pytest.approx(rate["H200"], rel=0.01), rate


def test_ring_all_reduce_overlapped_with_backward_by_hand():
    link = LINKS["p3"]
    params = int(FLOPS[("resnet50", 224)]["Parameters"])
    nbytes, step = 4 * params, 0.2
    ring = 2 * 7 / 8 * nbytes / (float(link["IntraGBps"]) * 1e9 * 0.7)
    exposed = max(ring - 2 / 3 * step, ring * 25 * 2**20 / nbytes)
    got = multihost.exposed_comm_seconds(step, params, 8, 1, multihost.link_for("p3"))
    assert got == pytest.approx(exposed, rel=1e-12)
    z8 = statistics.NormalDist().inv_cdf((8 - 0.375) / (8 + 0.25))
    eff = multihost.efficiency(step, params, 8, 1, multihost.link_for("p3"), 0.02)
    assert eff == pytest.approx(step / (step + exposed + step * 0.02 * z8), rel=1e-12)
    # two hosts add the network ring: 2 (h-1)/h x bytes at 70 % of its Gbit/s
    net = 2 * 1 / 2 * nbytes / (float(link["NetworkGbps"]) / 8 * 1e9 * 0.7)
    two = multihost.exposed_comm_seconds(10.0, params, 8, 2, multihost.link_for("p3"))
    assert two == pytest.approx((ring + net) * 25 * 2**20 / nbytes, rel=1e-12)


def test_the_studies_k80_table_is_reproduced_without_being_fitted_to_it():
    _jitter, fitted_to = multihost.fitted_jitter()
    assert fitted_to and not any(i.startswith("beeva") for i in fitted_to)
    for net in ("resnet50", "resnet152"):
        one, eight = f"beeva-{net}-k80x1", f"beeva-{net}-k80x8"
        published = float(row(eight)["ImagesPerSec"]) / (8 * float(row(one)["ImagesPerSec"]))
        assert published == pytest.approx(0.9375)  # 150 / 160 and 360 / 384
        res = backtest.predict_row(
            calibration.rows()[[r.id for r in calibration.rows()].index(eight)]
        )
        p = throughput.predict(backtest.setup_of(res.row), exclude=frozenset({eight}))
        assert abs(p.efficiency - published) <= 0.05, (net, p.efficiency)
        assert abs(res.error) <= 0.10, (net, res.predicted)


def test_leave_one_out_backtest_median_error_within_30_percent():
    results = backtest.run()
    s = backtest.summary(results)
    assert s["unpredicted"] == [] and s["rows"] == len(CAL)
    # every error recomputed here from the published figure in the CSV
    published = [float(row(r.row.id)["ImagesPerSec"]) for r in results]
    errors = [abs(r.predicted - p) / p for r, p in zip(results, published, strict=True)]
    assert statistics.median(errors) == pytest.approx(s["median_abs_error"])
    assert s["median_abs_error"] <= 0.30
