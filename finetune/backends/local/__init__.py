"""The local backend: runs the trainer as a subprocess on this machine."""
