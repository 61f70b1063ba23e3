"""AWS plumbing for the cloud backends: sessions and error messages, bounded retries, the
content-addressed dataset upload to S3, CloudWatch logs, ECR images and the infra stack.

boto3 and the SageMaker SDK are imported inside the functions that need them, never at module
level, so ``finetune --help`` (and every local-only command) stays instant.
"""
