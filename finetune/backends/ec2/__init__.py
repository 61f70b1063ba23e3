"""The EC2 backend: raw instances running the on-instance agent (agent/)."""
