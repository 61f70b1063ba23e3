"""The engines' runtimes, one package each (mxnet/, torch/), each exporting its ``RUNTIME``
(finetune.contracts.engine.EngineRuntime); their specs are in finetune.engines."""
