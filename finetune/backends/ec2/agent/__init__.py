"""The on-instance agent of the EC2 backend: `python -m finetune.backends.ec2.agent`.

It lays out the /opt/ml tree from the run's S3 prefix, runs `python -m finetune.train` as a
child, keeps metrics, logs, status and checkpoints current in S3, watches IMDSv2 for spot
interruption notices, and ends with a final status (and, where configured, a shutdown).
"""
