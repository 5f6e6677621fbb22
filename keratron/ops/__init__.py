"""The op namespace, named and defaulted like `keras.ops` (`keras.ops.nn` names included)."""

# ruff: noqa: I001, E402  (the dispatcher is imported first: it installs the executor)

from keratron.ops import _dispatch  # noqa: F401  (installs the executor)
from keratron.ops.elementwise import *  # noqa: F403
from keratron.ops.shaping import *  # noqa: F403
from keratron.ops.sorting import *  # noqa: F403
from keratron.ops.reduction import *  # noqa: F403
from keratron.ops.creation import *  # noqa: F403
from keratron.ops.linalg import *  # noqa: F403
from keratron.ops.arrays import *  # noqa: F403
from keratron.ops.segment import *  # noqa: F403
from keratron.ops.nn import *  # noqa: F403
from keratron.ops.signal import *  # noqa: F403
from keratron.ops.core import *  # noqa: F403
from keratron.ops import core, image, linalg, math, nn, numpy  # noqa: F401  (Keras's namespaces)

_dispatch.attach_kernel_routes()

from keratron.ops import symbolic as _symbolic  # noqa: E402

_symbolic.wrap_namespaces(globals())  # ops on KerasTensors record functional-graph nodes

from keratron.autodiff.tensor import install_operators as _install_operators  # noqa: E402

_install_operators(globals())  # Tensor's operators (x + y, x[i], x.T) call these ops

from keratron.autodiff.tape import install_engine_primitives as _install_engine  # noqa: E402
from keratron.ops import elementwise, reduction, shaping  # noqa: E402

_install_engine(  # the primitives the gradient engine and the compiler bind themselves
    add=elementwise.add_p,
    sum=reduction.sum_p,
    reshape=shaping.reshape_p,
    cast=elementwise.cast_p,
    stack=shaping.stack_p,
    ones_like=elementwise.ones_like_p,
    zeros_like=elementwise.zeros_like_p,
    stop_gradient=elementwise.stop_gradient_p,
)
