"""Pretrained image models, as `keras.applications`: every architecture Keras 3 ships (VGG,
ResNet and ResNetV2, Xception, Inception V3 and Inception-ResNet V2, MobileNet V1-V3, DenseNet,
NASNet, EfficientNet and V2, ConvNeXt), with Keras's layer names and weight layouts so Keras's
`.h5` weight files load unchanged.

Example:
    >>> model = keratron.applications.MobileNet(weights=None, alpha=0.25)
    >>> images = np.random.uniform(0, 255, (2, 224, 224, 3))
    >>> x = keratron.applications.mobilenet.preprocess_input(images)
    >>> model.predict(x, verbose=0).shape
    (2, 1000)
"""

from keratron.applications import (
    convnext,
    densenet,
    efficientnet,
    efficientnet_v2,
    imagenet_utils,
    inception_resnet_v2,
    inception_v3,
    mobilenet,
    mobilenet_v2,
    mobilenet_v3,
    nasnet,
    resnet,
    resnet50,
    resnet_v2,
    vgg16,
    vgg19,
    xception,
)
from keratron.applications.convnext import (
    ConvNeXtBase,
    ConvNeXtLarge,
    ConvNeXtSmall,
    ConvNeXtTiny,
    ConvNeXtXLarge,
)
from keratron.applications.densenet import DenseNet121, DenseNet169, DenseNet201
from keratron.applications.efficientnet import (
    EfficientNetB0,
    EfficientNetB1,
    EfficientNetB2,
    EfficientNetB3,
    EfficientNetB4,
    EfficientNetB5,
    EfficientNetB6,
    EfficientNetB7,
)
from keratron.applications.efficientnet_v2 import (
    EfficientNetV2B0,
    EfficientNetV2B1,
    EfficientNetV2B2,
    EfficientNetV2B3,
    EfficientNetV2L,
    EfficientNetV2M,
    EfficientNetV2S,
)
from keratron.applications.inception_resnet_v2 import InceptionResNetV2
from keratron.applications.inception_v3 import InceptionV3
from keratron.applications.mobilenet import MobileNet
from keratron.applications.mobilenet_v2 import MobileNetV2
from keratron.applications.mobilenet_v3 import MobileNetV3Large, MobileNetV3Small
from keratron.applications.nasnet import NASNetLarge, NASNetMobile
from keratron.applications.resnet import ResNet50, ResNet101, ResNet152
from keratron.applications.resnet_v2 import ResNet50V2, ResNet101V2, ResNet152V2
from keratron.applications.vgg16 import VGG16
from keratron.applications.vgg19 import VGG19
from keratron.applications.xception import Xception

__all__ = [
    "EfficientNetB0",
    "EfficientNetB1",
    "EfficientNetB2",
    "EfficientNetB3",
    "EfficientNetB4",
    "EfficientNetB5",
    "EfficientNetB6",
    "EfficientNetB7",
    "EfficientNetV2B0",
    "EfficientNetV2B1",
    "EfficientNetV2B2",
    "EfficientNetV2B3",
    "EfficientNetV2L",
    "EfficientNetV2M",
    "EfficientNetV2S",
    "efficientnet",
    "efficientnet_v2",
    "ConvNeXtBase",
    "ConvNeXtLarge",
    "ConvNeXtSmall",
    "ConvNeXtTiny",
    "ConvNeXtXLarge",
    "DenseNet121",
    "DenseNet169",
    "DenseNet201",
    "ResNet50",
    "ResNet101",
    "ResNet152",
    "ResNet50V2",
    "ResNet101V2",
    "ResNet152V2",
    "VGG16",
    "VGG19",
    "Xception",
    "densenet",
    "resnet",
    "resnet50",
    "resnet_v2",
    "vgg16",
    "vgg19",
    "xception",
    "InceptionResNetV2",
    "InceptionV3",
    "MobileNet",
    "MobileNetV2",
    "MobileNetV3Large",
    "MobileNetV3Small",
    "NASNetLarge",
    "NASNetMobile",
    "convnext",
    "imagenet_utils",
    "inception_resnet_v2",
    "inception_v3",
    "mobilenet",
    "mobilenet_v2",
    "mobilenet_v3",
    "nasnet",
]
