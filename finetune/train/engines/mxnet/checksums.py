"""The checksums of the pretrained weights the MXNet engine may download, shipped with
finetune (pinned): a downloaded file is used only if its sha1 is the one here, whatever the
installed model zoo's own table says. Values: GluonCV 0.10.5's model store (the files at
https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/gluon/models/NAME-SHA1[:8].zip).

The ImageNet-11k ResNet-152 checkpoint of the MXNet studies has no published checksum; give
the recipe's model.weights_sha256 to pin it (its sha256 is recorded beside it on download).
"""

from __future__ import annotations

GLUON_REPO = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/"
SYMBOL_URL = "https://data.mxnet.io/models/imagenet-11k/resnet-152/resnet-152-{}"

ZOO_SHA1 = {
    "resnet101_v1": "d988c13d6159779e907140a638c56f229634cb02",
    "resnet101_v1b": "a455932aa95cb7dcfa05fd040b9b5a5660733c39",
    "resnet101_v1c": "064858f23f9878bfbbe378a88ccb25d612b149a1",
    "resnet101_v1d": "1b2b825feff86b0354642a4ab59f9b6e35e47338",
    "resnet101_v2": "18e93e4f48947e002547f50eabbcc9c83e516aa6",
    "resnet152_v1": "acfd09703b113143af9c33898bad8b6154fd6fb0",
    "resnet152_v1b": "a5a61ee1ce5ab7c09720775b223360f3c60e211d",
    "resnet152_v1c": "75babab699e1c93f5da3c1ce4fd0092d1075f9a0",
    "resnet152_v1d": "cddbc86ff24a5544f57242ded0acb14ef1fbd437",
    "resnet152_v2": "f2695542de38cf7e71ed58f02893d82bb409415e",
    "resnet18_v1": "a0666292f0a30ff61f857b0b66efc0228eb6a54b",
    "resnet18_v1b": "2d9d980c990442f826f20781ed039851e78dabe3",
    "resnet18_v2": "a81db45fd7b7a2d12ab97cd88ef0a5ac48b8f657",
    "resnet34_v1": "48216ba99a8b1005d75c0f3a0c422301a0473233",
    "resnet34_v1b": "8e16b84814e84f64d897854003f049872991eaa6",
    "resnet34_v2": "9d6b80bbc35169de6b6edecffdd6047c56fdd322",
    "resnet50_v1": "cc729d95031ca98cf2ff362eb57dee4d9994e4b2",
    "resnet50_v1b": "0ecdba34691be172036ddf244ff1b2eade75ffde",
    "resnet50_v1c": "2a4e070854db538595cc7ee02e1a914bdd49ca02",
    "resnet50_v1d": "117a384ecf61490eb31ea147eb0e61e6d2b8a449",
    "resnet50_v2": "ecdde35339c1aadbec4f547857078e734a76fb49",
}
