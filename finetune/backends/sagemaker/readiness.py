"""What `finetune check` asks of the SageMaker backend: our image where a recipe needs it,
the run role (FINETUNE_ROLE_ARN, or the stack's boundary that each run's own role carries)
and the account's training-job quota for the instance type (Service Quotas counts SageMaker
training instances per type, by name: "ml.g5.xlarge for training job usage")."""

from __future__ import annotations

from finetune import settings
from finetune.aws import readiness as r
from finetune.aws import retries
from finetune.aws.infra import boundary_arn
from finetune.catalog import instances

INSTANCE = "ml.g5.xlarge"  # the type checked without --instance


def items(aws, instance: str | None, spot: bool = False) -> list[r.Item]:
    name = "ml." + instances.get(instance or INSTANCE).name
    conf = settings.get()
    why = "the PyTorch engine runs in AWS's PyTorch image; MXNet recipes need it"
    boundary = boundary_arn(aws.account_id, aws.region, "sagemaker")
    return [
        r.image(aws, conf.image, needed=False, why=why),
        r.run_role(aws, conf.role_arn, boundary),
        _quota(aws, name, spot),
    ]


def _quota(aws, instance: str, spot: bool) -> r.Item:
    label = f"{instance} for {'spot ' if spot else ''}training job usage"
    value, why, code = None, "", ""
    try:
        pages = aws.client("service-quotas").get_paginator("list_service_quotas")
        for page in retries.call(lambda: list(pages.paginate(ServiceCode="sagemaker"))):
            for quota in page["Quotas"]:
                if quota["QuotaName"] == label:
                    value, code = float(quota["Value"]), quota["QuotaCode"]
        why = "" if value is not None else "no such quota in this region"
    except Exception as exc:
        why = retries.error_code(exc) or type(exc).__name__
    fix = (
        f"ask for at least 1: `aws service-quotas request-service-quota-increase --service-code "
        f"sagemaker --quota-code {code or 'CODE'} --desired-value 1 --region {aws.region}` (or "
        "the Service Quotas console); new accounts start at 0 for most GPU types."
    )
    need = "servicequotas:ListServiceQuotas (no resource-level permissions: Resource *)"
    return r.quota(f"'{label}'", value, 1, "instances", why, fix, need)
