"""The full sha256 of torchvision's published ImageNet weight files, where a public record of
it was found (docs/decisions/162-torchvision-digests.md names the records, per file): such
a file is used only if its whole digest is the one here, wherever it came from (torchvision's
server, FINETUNE_WEIGHTS_MIRROR, a cache). torchvision itself publishes only the first 8 hex
digits, in the file name; a file not listed here is checked against those and its full
digest is recorded at its first download (finetune/download.py), then checked on every use.
"""

from __future__ import annotations

PUBLISHED_SHA256 = {
    "convnext_base-6075fbad.pth": (
        "6075fbad31c688f9ed013922a59daf0fc2f4dc12e6e43bc01fa840c7bd1ca2cd"
    ),
    "convnext_small-0c510722.pth": (
        "0c510722adfd92966a2bd72b92f785ca05966bbac03cafe2f7a90b1f54bfab9a"
    ),
    "convnext_tiny-983f1562.pth": (
        "983f1562536e84ff750a1576fb08e54de751dbf2e17c0d8a4a13704341fdcd3d"
    ),
    "efficientnet_b0_rwightman-7f5810bc.pth": (
        "7f5810bc96def8f7552d5b7e68d53c4786f81167d28291b21c0d90e1fca14934"
    ),
    "efficientnet_b1-c27df63c.pth": (
        "c27df63ce6eb17ef8bcea58922fd3a254cba910c720f41ee89d64d99fb7a4ddf"
    ),
    "efficientnet_b4_rwightman-23ab8bcd.pth": (
        "23ab8bcd5bdbef61a7a43b91adcad81f622fd7f36fb4935a569828d77888c44e"
    ),
    "efficientnet_v2_s-dd5fe13b.pth": (
        "dd5fe13b1d60ec15317ccc8ca158186e134d3366c3dde9cb9a4e301f2dc66c74"
    ),
    "mobilenet_v3_large-5c1a4163.pth": (
        "5c1a416349c4cf298f2a6a5e2600ed0ee55e604713578f5e74e6bc8bcaef7997"
    ),
    "mobilenet_v3_small-047dcff4.pth": (
        "047dcff4addef86ea5bc2eff13c9614dc11f47ab1160d0a71a25e7db994f4e1f"
    ),
    "resnet101-cd907fc2.pth": "cd907fc2a0de2292b2ba2b27d2216bc672d84632d1cf20058d01c0c03b5e020e",
    "resnet18-f37072fd.pth": "f37072fd47e89c5e827621c5baffa7500819f7896bbacec160b1a16c560e07ec",
    "resnet34-b627a593.pth": "b627a593bcbe140c234610266fe4f8ae95ea42fc881d091c9b6052e6b1d0590f",
    "resnet50-0676ba61.pth": "0676ba61b6795bbe1773cffd859882e5e297624d384b6993f7c9e683e722fb8a",
    "resnet50-11ad3fa6.pth": "11ad3fa62ca79e40addfd354a8ec4b7c75143b3038b8d2a807fbc68deab379ca",
    "swin_t-704ceda3.pth": "704ceda373461b0a224fcdddd75cd2a5e9f8064512ed47adbddef7f343fd147b",
    "vit_b_16-c867db91.pth": "c867db91d3e12c6cbadabb610d73c24a546bf82d8c03a9fea34f43a712ddb0e9",
}
