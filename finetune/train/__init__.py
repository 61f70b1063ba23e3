"""The trainer: runs where the GPUs are (a SageMaker container, an EC2 instance, or a local
subprocess) and reads the container's contract (finetune.contracts.container). Start a run
with ``python -m finetune.train`` (finetune.train.entrypoint) on an /opt/ml tree; nothing here
imports a framework until training starts, and the CLI never imports this package."""
