"""How the MXNet engine imports MXNet and GluonCV (finetune.train.engines.mxnet.zoo), each in a
fresh interpreter: what a trainer process imports, and nothing it hid stays hidden."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("mxnet")
pytest.importorskip("sklearn")  # the dev lock has it: without it there is nothing to hide


def _python(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_trainer_imports_mxnet_and_gluoncv_without_scikit_learn_and_can_import_it_after():
    out = _python(
        "import sys\n"
        "from finetune.train.engines.mxnet import session, zoo\n"  # the trainer's imports
        "zoo.model_zoo()\n"
        "import mxnet.model, mxnet.ndarray.sparse\n"
        "print('sklearn' in sys.modules, mxnet.model.BASE_ESTIMATOR is object)\n"
        "print('scipy.stats' in sys.modules, mxnet.ndarray.sparse.spsp is not None)\n"
        "import torch, sklearn.base, scipy.stats\n"  # none stays hidden
        "print(sklearn.base.BaseEstimator.__name__, torch.__name__, scipy.stats.norm.name)\n"
    )
    assert out.split() == ["False", "True", "False", "True", "BaseEstimator", "torch", "norm"]


def test_a_kvstore_role_imports_mxnet_without_scikit_learn_or_scipy_stats():
    # the role's own command line, here without DMLC_ROLE: MXNet imports and nothing serves
    from finetune.train.engines.mxnet.cluster import ROLE_CODE

    out = _python(
        ROLE_CODE + "\n"
        "import mxnet.model\n"
        "print(mxnet.model.BASE_ESTIMATOR is object, 'sklearn.base' in sys.modules)\n"
        "print(any(m.startswith('scipy.stats.') for m in sys.modules), 'finetune' in sys.modules)\n"
    )
    assert out.split() == ["True", "False", "False", "False"]


def test_the_hidden_import_raises_import_error_and_is_restored_as_it_was():
    out = _python(
        "import sys\n"
        "from finetune.train.engines.mxnet.zoo import _hidden\n"
        "import json\n"
        "with _hidden('json'):\n"
        "    try:\n"
        "        import json as j2\n"
        "    except ImportError:\n"
        "        print('refused')\n"
        "print(sys.modules['json'] is json)\n"
        "with _hidden('sklearn'):\n"
        "    pass\n"
        "print('sklearn' in sys.modules)\n"
    )
    assert out.split() == ["refused", "True", "False"]
