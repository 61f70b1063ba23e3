"""The training image of a SageMaker job, per engine.

torch  AWS's own PyTorch training image (nothing to build): its URI comes from sagemaker-core's
       image_uris.retrieve, which reads the JSON config bundled with the SDK (no network), for
       the framework version the engine table pins (finetune.catalog.engines: 2.10.0, whose
       only Python is py313) and the instance's processor (GPU image on GPU instances).
mxnet  our image, built from the Dockerfile and pushed by `finetune image push` (AWS ended
       its MXNet images in 2023, and the SageMaker SDK v3 no longer knows MXNet).
"""

from __future__ import annotations

from finetune.errors import ConfigError

PYTORCH_PY = "py313"  # the Python of AWS's pytorch-training 2.10.0 image (its only one)
IMAGE_SCOPE = "training"


def pytorch_image(region: str, instance_type: str) -> str:
    """AWS's PyTorch training image for ``instance_type`` (ml.* or EC2 name) in ``region``."""
    from finetune.backends.sagemaker.request import sagemaker_instance
    from finetune.catalog import engines

    version = engines.build("torch").version
    try:
        from sagemaker.core import image_uris
    except ImportError:
        raise ConfigError(
            "sagemaker-core is not installed, so the PyTorch image cannot be looked up",
            "install the AWS extra: pip install 'finetune[aws]'.",
        ) from None
    try:
        return image_uris.retrieve(
            framework="pytorch",
            region=region,
            version=version,
            py_version=PYTORCH_PY,
            instance_type=sagemaker_instance(instance_type),
            image_scope=IMAGE_SCOPE,
        )
    except (ValueError, KeyError) as exc:
        raise ConfigError(
            f"AWS has no PyTorch {version} training image for {instance_type} in {region} "
            f"(sagemaker-core says: {exc})",
            "pick another region (--region), or pass --image URI of a PyTorch image there.",
        ) from None


def default_image(engine: str, region: str, instance_type: str, account: str) -> str:
    """The image a job of ``engine`` runs when no --image is given."""
    from finetune import __version__
    from finetune.aws.image import default_image as our_image

    if engine == "torch":
        return pytorch_image(region, instance_type)
    return our_image(account, region, __version__)


def runtime(engine: str, image: str) -> dict[str, str]:
    """What runs the engine, as recorded in the plan and shown by --dry-run."""
    from finetune.catalog import engines

    source = (
        f"AWS PyTorch training image (sagemaker-core image_uris, {PYTORCH_PY})"
        if engine == "torch"
        else "our image from the Dockerfile (`finetune image push`)"
    )
    return {"engine": engine, "image": image, "source": source, "needs": engines.needs(engine)}
