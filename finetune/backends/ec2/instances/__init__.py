"""The life of a run's instances (SkyPilot's provision/aws/instance.py): one launch attempt,
its hosts and intent, observing it, settling, relaunching, adopting and releasing."""
