"""EC2 set-up shared by a run's attempts (SkyPilot's provision/aws/config.py): clients,
network, roles, AMIs, quotas, and cleanup of what no run owns."""
