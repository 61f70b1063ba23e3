"""Datasets: image folders to MXNet RecordIO, with a manifest. Needs no MXNet."""
