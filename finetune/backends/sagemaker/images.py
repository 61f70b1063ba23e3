"""The training image of a SageMaker job, per engine (its descriptor's ``aws``: see
finetune.engines.registry).

AWS keeps the engine's framework (torch today)
       AWS's own training image of it (nothing to build): its URI comes from sagemaker-core's
       image_uris.retrieve, which reads the JSON config bundled with the SDK (no network), for
       the framework version of the engine's build (2.10.0, whose only Python is py313) and
       the instance's processor (GPU image on GPU instances).
our image (mxnet today)
       built from the Dockerfile and pushed by `finetune image push` (AWS ended its MXNet
       images in 2023, and the SageMaker SDK v3 no longer knows MXNet).
"""

from __future__ import annotations

from finetune import __version__
from finetune.aws.image import default_image as our_image
from finetune.backends.sagemaker.request import sagemaker_instance
from finetune.catalog import engines
from finetune.engines import registry
from finetune.errors import ConfigError

IMAGE_SCOPE = "training"


def framework_image(engine: str, region: str, instance_type: str) -> str:
    """AWS's training image of ``engine``'s framework for ``instance_type`` (ml.* or EC2
    name) in ``region``."""
    described = registry.get(engine)
    aws, version = described.aws, described.build.version
    if aws is None:  # the engine runs our image (needs_our_image): AWS has none for it
        raise ConfigError(
            f"AWS publishes no training image for the {engine} engine's framework",
            "build and push ours with `finetune image push`, or pass --image URI.",
        )
    try:
        from sagemaker.core import image_uris
    except ImportError:
        raise ConfigError(
            f"sagemaker-core is not installed, so the {aws.title} image cannot be looked up",
            "install the AWS extra: pip install 'finetune[aws]'.",
        ) from None
    try:
        return image_uris.retrieve(
            framework=aws.image_framework,
            region=region,
            version=version,
            py_version=aws.image_python,
            instance_type=sagemaker_instance(instance_type),
            image_scope=IMAGE_SCOPE,
        )
    except (ValueError, KeyError) as exc:
        raise ConfigError(
            f"AWS has no {aws.title} {version} training image for {instance_type} in {region} "
            f"(sagemaker-core says: {exc})",
            f"pick another region (--region), or pass --image URI of a {aws.title} image there.",
        ) from None


def default_image(engine: str, region: str, instance_type: str, account: str) -> str:
    """The image a job of ``engine`` runs when no --image is given."""
    if registry.get(engine).aws:
        return framework_image(engine, region, instance_type)
    return our_image(account, region, __version__)


def runtime(engine: str, image: str) -> dict[str, str]:
    """What runs the engine, as recorded in the plan and shown by --dry-run."""
    aws = registry.get(engine).aws
    source = (
        f"AWS {aws.title} training image (sagemaker-core image_uris, {aws.image_python})"
        if aws
        else "our image from the Dockerfile (`finetune image push`)"
    )
    return {"engine": engine, "image": image, "source": source, "needs": engines.needs(engine)}
