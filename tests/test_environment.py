"""The test environment is complete: other tests skip when an optional piece is missing
(so a partial install can still run them), and this test makes such a gap a failure."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "mxnet",
        "torch",
        "torchvision",
        "onnx",
        "onnxscript",
        "onnxruntime",
        "boto3",
        "moto",
        "matplotlib",
        "sagemaker.core",
        "cfnlint",
    ],
)
def test_module_is_installed(module):
    importlib.import_module(module)


def test_gluoncv_is_installed():
    # (gluoncv itself refuses to import beside torch >= 2: the engine's way in)
    from finetune.train.engines.mxnet.zoo import model_zoo

    assert model_zoo().get_model("resnet18_v1", pretrained=False, classes=2) is not None


def test_mxnet_has_the_numpy_it_needs():
    import numpy

    assert numpy.__version__.startswith("1.23"), "mxnet 1.9.1 needs numpy < 1.24"


def test_shellcheck_is_available():
    assert shutil.which("shellcheck") or (Path(sys.executable).parent / "shellcheck").exists()
