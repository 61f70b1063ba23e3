"""Weight files made by the tests themselves: they never download anything."""

from __future__ import annotations

from pathlib import Path


def save_zoo_params(path: Path, model: str = "resnet18_v1", classes: int = 1000) -> dict:
    """A random-init model-zoo network saved as if it were the published ImageNet weights;
    returns its parameters (name -> numpy array) for comparisons."""
    import mxnet as mx

    from finetune.train.engines.mxnet.zoo import model_zoo

    net = model_zoo().get_model(model, pretrained=False, classes=classes)
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 3, 32, 32)))
    path.parent.mkdir(parents=True, exist_ok=True)
    net.save_parameters(str(path))
    return {k: v.asnumpy() for k, v in mx.nd.load(str(path)).items()}


def save_symbol_checkpoint(prefix: Path, classes: int = 11) -> dict:
    """A tiny network in the ImageNet-11k checkpoint's format and layer names (Module
    checkpoint: PREFIX-symbol.json + PREFIX-0000.params with arg:/aux: keys), ending
    ... -> flatten0 -> fc1 -> softmax like the real resnet-152. Returns arg params."""
    import mxnet as mx

    x = mx.sym.var("data")
    x = mx.sym.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv0")
    x = mx.sym.BatchNorm(x, name="bn1")
    x = mx.sym.Activation(x, act_type="relu", name="relu1")
    x = mx.sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="pool1")
    x = mx.sym.Flatten(x, name="flatten0")
    x = mx.sym.FullyConnected(x, num_hidden=classes, name="fc1")
    sym = mx.sym.SoftmaxOutput(x, name="softmax")
    mod = mx.mod.Module(sym, context=mx.cpu())
    mod.bind(data_shapes=[("data", (1, 3, 32, 32))], label_shapes=[("softmax_label", (1,))])
    mod.init_params(mx.init.Xavier())
    args, aux = mod.get_params()
    prefix.parent.mkdir(parents=True, exist_ok=True)
    mx.model.save_checkpoint(str(prefix), 0, sym, args, aux)
    return {k: v.asnumpy() for k, v in args.items()}
