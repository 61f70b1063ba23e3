"""The Plan: recipe + prepared dataset + resources -> derived values and hyperparameters."""

from __future__ import annotations

import json
import shutil

import pytest

from finetune.cli._plan_view import summary_lines
from finetune.contracts.hparams import TrainHyperparameters
from finetune.data import manifest as mf
from finetune.errors import ConfigError, DataError, UsageError
from finetune.plan import Plan, Resources, build_plan
from finetune.recipes.loading import load_recipe


def test_plan_from_the_tiny_dataset(tiny_dataset):
    plan = build_plan("smoke-resnet18", tiny_dataset)
    m = mf.load(tiny_dataset)
    assert plan.dataset.num_classes == 8 == plan.hyperparameters.num_classes
    assert plan.hyperparameters.num_training_samples == m.splits["train"].count == 80
    assert plan.dataset.val_count == m.splits["val"].count
    assert plan.dataset.rec_sha256 == {
        name: entry.sha256 for name, entry in m.files.items() if name.endswith(".rec")
    }
    assert len(plan.dataset.rec_sha256) == 2
    assert plan.dataset.manifest_sha256 == mf.sha256_file(tiny_dataset / mf.MANIFEST)
    d = plan.derived
    assert (d.devices, d.global_batch, d.steps_per_epoch, d.total_steps) == (1, 8, 10, 20)
    hp = plan.hyperparameters
    assert (d.lr, hp.options.kvstore, d.warmup_steps) == (0.01, "local", 0)
    assert (hp.device, hp.top_k, hp.lr_steps, hp.image_size) == ("cpu", 5, (1.0,), 32)


def test_scaled_plan_with_warmup_in_steps(tiny_dataset):
    res = Resources(backend="sagemaker", instance_type="ml.p3.8xlarge", hosts=2,
                    devices_per_host=4, device="gpu", spot=True)  # fmt: skip
    plan = build_plan("smoke-resnet18", tiny_dataset, res, ["batch_per_device=2", "warmup_steps=3"])
    d = plan.derived
    assert (d.devices, d.global_batch, d.steps_per_epoch) == (8, 16, 5)
    assert d.lr == pytest.approx(0.08)
    hp = plan.hyperparameters
    assert (d.warmup_steps, d.warmup_epochs, hp.options.kvstore) == (3, 0.6, "dist_device_sync")
    assert (hp.hosts, hp.devices_per_host, hp.global_batch, hp.lr) == (2, 4, 16, d.lr)
    assert plan.lr_schedule().at_step(0) == pytest.approx(0.01)
    assert plan.lr_schedule().at_step(3) == pytest.approx(0.08)
    assert plan.overrides == ("batch_per_device=2", "warmup_steps=3")


def test_hyperparameters_round_trip_through_strings(tiny_dataset):
    plan = build_plan("smoke-resnet18", tiny_dataset, overrides=["kind=cosine", "warmup_epochs=1"])
    assert plan.hyperparameters.keep_checkpoints == 2  # the default
    assert (
        build_plan(
            "smoke-resnet18", tiny_dataset, overrides=["keep_checkpoints=5"]
        ).hyperparameters.keep_checkpoints
        == 5
    )
    strings = plan.hyperparameters.to_strings()
    assert all(isinstance(v, str) for v in strings.values()) and len(strings) <= 100
    assert TrainHyperparameters.from_strings(strings) == plan.hyperparameters


def test_hyperparameters_recorded_under_their_old_names_still_read(tiny_dataset):
    """Issue 20 renamed batch_size_per_device and global_batch_size (one word per idea): a
    hyperparameters.json or a plan stored before reads back; new ones carry the new names."""
    plan = build_plan("smoke-resnet18", tiny_dataset, overrides=["batch_per_device=4"])
    strings = plan.hyperparameters.to_strings()
    assert (strings["batch_per_device"], strings["global_batch"]) == ("4", "4")
    assert not {"batch_size_per_device", "global_batch_size"} & set(strings)
    old = dict(strings)
    old["batch_size_per_device"], old["global_batch_size"] = (
        old.pop("batch_per_device"),
        old.pop("global_batch"),
    )
    assert TrainHyperparameters.from_strings(old) == plan.hyperparameters
    stored = json.loads(plan.to_json())
    hp = stored["hyperparameters"]
    hp["batch_size_per_device"], hp["global_batch_size"] = (
        hp.pop("batch_per_device"),
        hp.pop("global_batch"),
    )
    assert Plan.from_json(json.dumps(stored)) == plan
    with pytest.raises(ConfigError, match="unknown hyperparameter"):  # not both at once
        TrainHyperparameters.from_strings({**strings, "global_batch_size": "4"})


def test_plan_json_round_trip_and_estimate_hook(tiny_dataset):
    plan = build_plan(load_recipe("smoke-resnet18"), tiny_dataset)
    assert Plan.from_json(plan.to_json()) == plan
    priced = plan.with_estimate({"eur": 0.42, "summary": ["0.42 EUR (on-demand, as of X)"]})
    assert plan.estimate is None and priced.estimate.eur == 0.42
    assert Plan.from_json(priced.to_json()) == priced
    assert any(line.startswith("estimate") and "0.42 EUR" in line for line in summary_lines(priced))
    with pytest.raises(ConfigError, match="not a valid plan"):
        Plan.from_json(json.dumps({"recipe": {}}))


def test_summary_lines_show_the_derived_values(tiny_dataset):
    res = Resources(backend="ec2", instance_type="p3.8xlarge", devices_per_host=4, device="gpu")
    plan = build_plan("smoke-resnet18", tiny_dataset, res, ["warmup_epochs=1"])
    text = "\n".join(summary_lines(plan))
    for expected in [
        "resnet18_v1 (random init)",
        "8 (80 train /",
        "ec2 p3.8xlarge: 1 host(s) x 4 gpu",
        "8 per device -> 32 global",
        "0.01 per device -> 0.04 (x4 devices)",
        "1 epoch(s) = 2 steps, 0.01 -> 0.04",
        "step: x0.5 at epoch(s) 1",
        "2 x 2 steps/epoch",
    ]:
        assert expected in text, expected


@pytest.mark.parametrize("width", [80, 120])
def test_summary_lines_fit_the_terminal(tiny_dataset, width):
    long = "0.42 EUR on-demand for 2 epochs of 2 steps " * 6
    plan = build_plan("smoke-resnet18", tiny_dataset).with_estimate({"summary": [long.strip()]})
    lines = summary_lines(plan, width)
    assert all(len(line) <= width for line in lines if str(tiny_dataset) not in line)
    start = next(i for i, line in enumerate(lines) if line.startswith("estimate"))
    pad = lines[start].index("0.42")
    wrapped = lines[start:]  # the estimate comes last
    assert len(wrapped) > 1
    assert " ".join(w[pad:] for w in wrapped).split() == long.split()  # words whole, in order
    assert all(w[:pad].isspace() for w in wrapped[1:])  # continuation lines under the value


def test_dataset_name_resolves_under_the_data_dir(tiny_dataset, tmp_path, monkeypatch):
    from finetune import settings

    target = settings.get().datasets_dir / "shapes"
    shutil.copytree(tiny_dataset, target)
    (tmp_path / "shapes").mkdir()  # a same-named folder here does not hide it
    monkeypatch.chdir(tmp_path)
    plan = build_plan("smoke-resnet18", overrides=["data.dataset=shapes"])
    assert plan.dataset.path == str(target.resolve())


def test_missing_manifest_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match=r"manifest\.json is missing") as info:
        build_plan("smoke-resnet18", tmp_path)
    assert "To fix: run `finetune prepare" in str(info.value)


def test_no_dataset_at_all_is_a_usage_error():
    with pytest.raises(UsageError, match="names no dataset"):
        build_plan("smoke-resnet18")


def test_damaged_dataset_is_a_data_error(tiny_dataset, tmp_path):
    copy = tmp_path / "shapes"
    shutil.copytree(tiny_dataset, copy)
    rec = next(copy.glob("*_train.rec"))
    rec.write_bytes(rec.read_bytes()[:-4])
    with pytest.raises(DataError, match="does not match its manifest"):
        build_plan("smoke-resnet18", copy)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["image_size=64"], "larger than the prepared images"),
        (["batch_per_device=100"], "exceeds the 80 training images"),
    ],
)
def test_impossible_combinations(tiny_dataset, overrides, match):
    with pytest.raises(ConfigError, match=match) as info:
        build_plan("smoke-resnet18", tiny_dataset, overrides=overrides)
    assert "To fix:" in str(info.value)


def test_top_k_is_dropped_when_it_covers_every_class(tiny_dataset):
    assert (
        build_plan("smoke-resnet18", tiny_dataset, overrides=["top_k=8"]).hyperparameters.top_k == 0
    )


def test_resources_rules():
    """Field ranges only: what a backend can place is the backend's to say (tests/backends)."""
    with pytest.raises(UsageError, match="devices_per_host") as info:
        Resources.create(devices_per_host=0)
    assert "To fix:" in str(info.value)
    assert (
        Resources(backend="ec2", instance_type="g5.xlarge", hosts=3, devices_per_host=2).devices
        == 6
    )


def test_a_stored_plan_with_the_kvstore_in_derived_still_reads(tiny_dataset):
    """Plans written before issue 20 carry MXNet's kvstore in ``derived``: they still load,
    and the kvstore the trainer gets is the hyperparameters' (the same value)."""
    plan = build_plan("smoke-resnet18", tiny_dataset, Resources(device="cpu"))
    stored = json.loads(plan.to_json())
    assert "kvstore" not in stored["derived"]
    stored["derived"]["kvstore"] = "local"  # as an older launch wrote it
    again = Plan.from_json(json.dumps(stored))
    assert again.derived == plan.derived
    assert again.hyperparameters.options.kvstore == plan.hyperparameters.options.kvstore == "local"


def test_models_and_image_sizes_are_checked_before_the_dataset_is_read(tmp_path):
    """Model names and sizes fail at plan time with what would work, before any dataset is
    read (the dataset given does not even exist); the MXNet engine refuses torch models."""
    missing = tmp_path / "no-such-dataset"
    with pytest.raises(ConfigError, match=r"(?s)unknown model 'convnext_tini'.*convnext_tiny"):
        build_plan("smoke-convnext-tiny", missing, overrides=["model=convnext_tini"])
    with pytest.raises(ConfigError, match=r"(?s)multiples of 16.*=32 or 48"):
        build_plan("smoke-vit-b16", missing, overrides=["image_size=40"])
    with pytest.raises(ConfigError, match=r"maxvit_t takes image sizes that are multiples of 224"):
        build_plan("smoke-vit-b16", missing, overrides=["model=maxvit_t"])
    with pytest.raises(ConfigError, match=r"torch model, but this recipe runs the mxnet engine"):
        build_plan("smoke-resnet18", missing, overrides=["model=efficientnet_v2_s"])


def test_a_torch_plan_carries_the_weights_preprocessing(tiny_dataset):
    """Swin-T's weights: bicubic, shorter side 232 for a 224 crop -> 33 px at 32 (by hand:
    round(32 x 232 / 224) = round(33.14)); torchvision's mean/std x 255. ResNets keep the
    studies' 0.875 and mean/std, as the MXNet engine does."""
    hp = build_plan("smoke-vit-b16", tiny_dataset, overrides=["model=swin_t"]).hyperparameters
    assert (hp.resize_shorter, hp.interpolation) == (33, "bicubic")
    assert hp.mean == pytest.approx((0.485 * 255, 0.456 * 255, 0.406 * 255))
    assert hp.std == pytest.approx((0.229 * 255, 0.224 * 255, 0.225 * 255))
    resnet = build_plan("smoke-resnet18-torch", tiny_dataset).hyperparameters
    mxnet = build_plan("smoke-resnet18", tiny_dataset).hyperparameters
    assert (resnet.resize_shorter, resnet.interpolation) == (round(32 / 0.875), "bilinear")
    assert (resnet.mean, resnet.std) == (mxnet.mean, mxnet.std)
    assert mxnet.resize_shorter == 0  # the contract's default: image_size / 0.875


def test_hyperparameters_refuse_a_nan_step_and_years_of_epochs(tiny_dataset):
    """Issue 49, item 7: the trainer's contract holds the same bounds as the recipe (a
    hyperparameters.json written by hand or by another tool)."""
    strings = build_plan("smoke-resnet18", tiny_dataset).hyperparameters.to_strings()
    for key, value in (("lr_steps", "[NaN]"), ("epochs", "99999999999")):
        with pytest.raises(ConfigError) as info:
            TrainHyperparameters.from_strings({**strings, key: value})
        assert key in str(info.value)


def test_a_plan_of_years_of_epochs_is_refused_before_any_launch_command():
    from typer.testing import CliRunner

    from finetune.cli import app

    res = CliRunner().invoke(app, ["plan", "smoke-resnet18", "--images", "1000", "--classes",
                                   "10", "--epochs", "99999999999"])  # fmt: skip
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert "less than or equal to 10000" in res.output and "To fix:" in res.output
    assert "finetune launch" not in res.output
