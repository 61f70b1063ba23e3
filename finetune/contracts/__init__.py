"""The contracts between launch, training and reports: the hyperparameters a run is given
(hparams), the metric lines training prints and the reports read (metrics), and the record a
run leaves of what it was asked and what it used (record)."""
