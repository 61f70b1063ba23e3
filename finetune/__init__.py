"""finetune: fine-tune pretrained ResNets on your own images on AWS GPUs, and know the cost."""

__version__ = "0.1.0"
