"""The heavy SDKs load on first use, and a missing one says which extra brings it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from finetune.adaptors import LazyImport
from finetune.errors import DependencyError


def test_a_module_that_names_the_sdks_does_not_import_them():
    code = (
        "import sys; import finetune.aws.session, finetune.report.plot, finetune.catalog.refresh;"
        "print([m for m in ('boto3', 'botocore', 'matplotlib') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_first_use_imports_the_module_and_its_submodules():
    json_ = LazyImport("json", "none")
    assert "not imported yet" in repr(json_)
    assert json_.loads("[1]") == [1] and "imported" in repr(json_)
    email = LazyImport("email", "none")
    assert email.mime.__name__ == "email.mime"  # a submodule its package does not import


def test_a_missing_package_names_its_extra():
    with pytest.raises(DependencyError, match=r"\[aws\] extra"):
        _ = LazyImport("finetune_no_such_sdk", "aws").Session
