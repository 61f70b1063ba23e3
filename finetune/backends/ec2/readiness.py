"""What `finetune check` asks of the EC2 backend: our image where a recipe needs it, the
stack's run-role boundary (each run's instance role carries it) and the account's vCPU quota
for the instance's family (Service Quotas, as the dry-run's pre-flight reads it)."""

from __future__ import annotations

from finetune.aws import readiness as r
from finetune.aws.infra import boundary_arn
from finetune.backends.ec2.preflight import configured_image
from finetune.backends.ec2.setup import quota as ec2_quota
from finetune.catalog import instances

INSTANCE = "g5.xlarge"  # the family checked without --instance (the recipes' headers use it)


def items(aws, instance: str | None, spot: bool = False) -> list[r.Item]:
    inst = instances.get(instance or INSTANCE)
    why = "the PyTorch engine runs on AWS's PyTorch AMI; MXNet recipes need it"
    found = ec2_quota.read(aws.client("service-quotas"), inst.name, spot)
    quota = r.quota(
        f"{found.name} ({inst.name})",
        found.vcpus,
        inst.vcpus,
        "vCPUs",
        found.why_unknown,
        ec2_quota.how_to_raise(found, inst.vcpus, aws.region),
        f"servicequotas:GetServiceQuota on {ec2_quota.quota_arn(found.code, aws)}",
    )
    return [
        r.image(aws, configured_image(), needed=False, why=why),
        r.run_role(aws, None, boundary_arn(aws.account_id, aws.region, "ec2")),
        quota,
    ]
