"""The torch engine's model table: torchvision's ImageNet classification networks by name,
with each weights variant's own evaluation transform and where the family's head sits; plain
data (no torch import), checked when a run is planned (docs/trainer.md: the model table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from finetune.engines import timmzoo
from finetune.errors import ConfigError, did_you_mean

IMAGENET_MEAN = (123.675, 116.28, 103.53)  # torchvision's (0.485, 0.456, 0.406) x 255
IMAGENET_STD = (58.395, 57.12, 57.375)  # (0.229, 0.224, 0.225) x 255
STUDY_MEAN = (123.68, 116.779, 103.939)  # the MXNet studies' (the hyperparameters' default)
STUDY_STD = (58.393, 57.12, 57.375)
HALF = (127.5, 127.5, 127.5)  # EfficientNetV2-L's weights: (0.5, 0.5, 0.5) x 255


@dataclass(frozen=True)
class Family:
    """Where a family's classifier head sits and how its builder takes an image size."""

    head: str  # dotted path of the replaced nn.Linear (e.g. "classifier.2")
    size_arg: str = ""  # builder keyword for the image size ("" = any size, pooled)
    norms: str = "BatchNorm"  # the normalisation layers a frozen backbone keeps as loaded
    layer_decay: bool = True  # the torch engine's optim.layer_depths knows its layers


FAMILIES: dict[str, Family] = {
    "resnet": Family("fc"),
    "resnext": Family("fc"),
    "wide_resnet": Family("fc"),
    "regnet": Family("fc", layer_decay=False),  # stem, trunk_output: no depths known
    "convnext": Family("classifier.2", norms="LayerNorm"),  # LayerNorm2d, Flatten, Linear
    "efficientnet": Family("classifier.1"),  # Dropout, Linear
    "efficientnet_v2": Family("classifier.1"),
    "mobilenet_v3": Family("classifier.3"),  # Linear, Hardswish, Dropout, Linear
    "vit": Family("heads.head", "image_size", "LayerNorm"),  # position embeddings per size
    "swin": Family("head", norms="LayerNorm"),
    "swin_v2": Family("head", norms="LayerNorm"),
    # MaxViT's classifier ends with Linear(bias=False)
    "maxvit": Family("classifier.5", "input_size", "BatchNorm, LayerNorm", layer_decay=False),
}


@dataclass(frozen=True)
class Backbone:
    """One network: builder name, weights, and the weights' own evaluation transform."""

    name: str
    family: str
    weights: str  # torchvision's weights enum (class name)
    variant: str  # the variant whose transform the contract copies
    crop: int  # the weights' crop size: the recipe's natural data.image_size
    resize: int  # shorter side before the centre crop at ``crop``
    interpolation: str = "bilinear"
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    multiple_of: int = 1  # image sizes the architecture accepts

    @property
    def head(self) -> str:
        return FAMILIES[self.family].head

    def resize_for(self, image_size: int) -> int:
        """The shorter side at ``image_size``: the weights' resize/crop ratio kept."""
        return round(image_size * self.resize / self.crop)


class _Study(TypedDict):
    """The transform of the MXNet studies' rows (passed as keywords)."""

    crop: int
    resize: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


def _rows() -> list[Backbone]:
    V1, V2 = "IMAGENET1K_V1", "IMAGENET1K_V2"
    b = Backbone
    study = _Study(crop=224, resize=256, mean=STUDY_MEAN, std=STUDY_STD)
    rows = [
        b("resnet18", "resnet", "ResNet18_Weights", V1, **study),
        b("resnet34", "resnet", "ResNet34_Weights", V1, **study),
        b("resnet50", "resnet", "ResNet50_Weights", V2, **study),
        b("resnet101", "resnet", "ResNet101_Weights", V2, **study),
        b("resnet152", "resnet", "ResNet152_Weights", V2, **study),
        b("resnext50_32x4d", "resnext", "ResNeXt50_32X4D_Weights", V2, 224, 232),
        b("resnext101_32x8d", "resnext", "ResNeXt101_32X8D_Weights", V2, 224, 232),
        b("resnext101_64x4d", "resnext", "ResNeXt101_64X4D_Weights", V1, 224, 232),
        b("wide_resnet50_2", "wide_resnet", "Wide_ResNet50_2_Weights", V2, 224, 232),
        b("wide_resnet101_2", "wide_resnet", "Wide_ResNet101_2_Weights", V2, 224, 232),
        b("convnext_tiny", "convnext", "ConvNeXt_Tiny_Weights", V1, 224, 236),
        b("convnext_small", "convnext", "ConvNeXt_Small_Weights", V1, 224, 230),
        b("convnext_base", "convnext", "ConvNeXt_Base_Weights", V1, 224, 232),
        b("convnext_large", "convnext", "ConvNeXt_Large_Weights", V1, 224, 232),
    ]
    effnet = [(224, 256, V1, "bicubic"), (240, 255, V2, "bilinear"), (288, 288, V1, "bicubic"),
              (300, 320, V1, "bicubic"), (380, 384, V1, "bicubic"), (456, 456, V1, "bicubic"),
              (528, 528, V1, "bicubic"), (600, 600, V1, "bicubic")]  # fmt: skip
    for i, (crop, resize, variant, interp) in enumerate(effnet):
        name, enum = f"efficientnet_b{i}", f"EfficientNet_B{i}_Weights"
        rows.append(b(name, "efficientnet", enum, variant, crop, resize, interp))
    rows += [
        b("efficientnet_v2_s", "efficientnet_v2", "EfficientNet_V2_S_Weights", V1, 384, 384),
        b("efficientnet_v2_m", "efficientnet_v2", "EfficientNet_V2_M_Weights", V1, 480, 480),
    ]
    rows.append(
        b("efficientnet_v2_l", "efficientnet_v2", "EfficientNet_V2_L_Weights", V1, 480, 480,
          interpolation="bicubic", mean=HALF, std=HALF)
    )  # fmt: skip
    for kind in ("x", "y"):
        for size in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf"):
            enum = f"RegNet_{kind.upper()}_{size.upper()}_Weights"
            rows.append(b(f"regnet_{kind}_{size}", "regnet", enum, V2, 224, 232))
    rows += [
        b("mobilenet_v3_large", "mobilenet_v3", "MobileNet_V3_Large_Weights", V2, 224, 232),
        b("mobilenet_v3_small", "mobilenet_v3", "MobileNet_V3_Small_Weights", V1, 224, 256),
        b("vit_b_16", "vit", "ViT_B_16_Weights", V1, 224, 256, multiple_of=16),
        b("vit_b_32", "vit", "ViT_B_32_Weights", V1, 224, 256, multiple_of=32),
        b("vit_l_16", "vit", "ViT_L_16_Weights", V1, 224, 242, multiple_of=16),
        b("swin_t", "swin", "Swin_T_Weights", V1, 224, 232, "bicubic"),
        b("swin_s", "swin", "Swin_S_Weights", V1, 224, 246, "bicubic"),
        b("swin_b", "swin", "Swin_B_Weights", V1, 224, 238, "bicubic"),
        b("swin_v2_t", "swin_v2", "Swin_V2_T_Weights", V1, 256, 260, "bicubic"),
        b("swin_v2_s", "swin_v2", "Swin_V2_S_Weights", V1, 256, 260, "bicubic"),
        b("swin_v2_b", "swin_v2", "Swin_V2_B_Weights", V1, 256, 272, "bicubic"),
        # every stage's grid (image / 4 ... / 32) must divide into 7 x 7 partitions
        b("maxvit_t", "maxvit", "MaxVit_T_Weights", V1, 224, 224, "bicubic", multiple_of=224),
    ]
    return rows


TABLE: dict[str, Backbone] = {row.name: row for row in _rows()}


def get(name: str) -> Backbone:
    """The row of a torch model name; ConfigError listing the known ones per family."""
    if name in TABLE:
        return TABLE[name]
    raise ConfigError(
        f"unknown model {name!r} for the torch engine.{did_you_mean(name, list(TABLE))}",
        f"use one of torchvision's: {known()}.",
    )


def known() -> str:
    """Every name, grouped by family: 'resnet: resnet18, ...; convnext: ...'."""
    by_family: dict[str, list[str]] = {}
    for row in TABLE.values():
        by_family.setdefault(row.family, []).append(row.name)
    return "; ".join(f"{fam}: {', '.join(names)}" for fam, names in by_family.items())


def check_image_size(name: str, image_size: int) -> None:
    """ConfigError for an image size the architecture cannot take (ViT: a multiple of its
    patch; MaxViT: of 224, its 7 x 7 partitions at every stage)."""
    row = get(name)
    if image_size % row.multiple_of:
        lower = max(row.multiple_of, image_size - image_size % row.multiple_of)
        raise ConfigError(
            f"{name} takes image sizes that are multiples of {row.multiple_of}, not "
            f"data.image_size={image_size}",
            f"set data.image_size={lower} or {lower + row.multiple_of}.",
        )


def check_layer_decay(name: str, layer_decay: float) -> None:
    """ConfigError, at plan time, for layer-wise rate decay on a family whose layers the
    torch engine cannot order (it would otherwise stop the trainer, on a paid instance)."""
    family = get(name).family
    if layer_decay != 1.0 and not FAMILIES[family].layer_decay:
        knows = ", ".join(f for f, fam in FAMILIES.items() if fam.layer_decay)
        raise ConfigError(
            f"optimizer.layer_decay={layer_decay:g}: layer-wise decay does not know the layers "
            f"of {name} ({family}); it knows {knows}",
            f"set optimizer.layer_decay=1 for {name}, or choose a model of those families.",
        )


def preprocessing(name: str, image_size: int) -> dict:
    """The contract's fields (hyperparameter names) for ``name`` at ``image_size``: the
    weights' own resize ratio, interpolation, mean and std."""
    row = get(name)
    return dict(
        resize_shorter=row.resize_for(image_size),
        interpolation=row.interpolation,
        mean=row.mean,
        std=row.std,
    )


class Rules:
    """This table and timm's zoo (finetune.engines.timmzoo: ``timm/<model>``) as the torch
    engine's per-model rules (finetune.engines.descriptor)."""

    def known(self) -> str:
        return f"{known()}; timm: any of timm's as timm/<model>[.<tag>] (`recipes models`)"

    def builds(self, model: str) -> bool:
        return timmzoo.is_timm(model)

    def check(self, model: str, image_size: int, layer_decay: float) -> None:
        if timmzoo.is_timm(model):
            timmzoo.check(model, image_size)  # any layer decay: timm's own groups
            return
        check_image_size(model, image_size)
        check_layer_decay(model, layer_decay)

    def preprocessing(self, model: str, image_size: int) -> dict:
        if timmzoo.is_timm(model):
            return timmzoo.preprocessing(model, image_size)
        return preprocessing(model, image_size)

    def mean_std(self, model: str) -> dict:
        if timmzoo.is_timm(model):
            try:
                return timmzoo.mean_std(model)
            except (ConfigError, ImportError):  # unknown, or no timm: the model check says
                return {}
        row = TABLE.get(model)
        return {"mean": row.mean, "std": row.std} if row else {}
