"""The test environment is complete: other tests skip when an optional piece is missing
(so a partial install can still run them), and this test makes such a gap a failure."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    "module", ["mxnet", "gluoncv", "boto3", "moto", "matplotlib", "sagemaker.core", "cfnlint"]
)
def test_module_is_installed(module):
    importlib.import_module(module)


def test_mxnet_has_the_numpy_it_needs():
    import numpy

    assert numpy.__version__.startswith("1.23"), "mxnet 1.9.1 needs numpy < 1.24"


def test_shellcheck_is_available():
    assert shutil.which("shellcheck") or (Path(sys.executable).parent / "shellcheck").exists()
