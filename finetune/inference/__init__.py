"""Using what was trained: classify images with a run's model (`finetune predict`) and
export it in a portable form (`finetune export`). Engine-neutral: the engines' own code lives
in finetune.train.engines.<engine>.predict, imported only when a command needs it."""
