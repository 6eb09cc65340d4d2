"""The kernels the built-in methods get from what they declare (`Target.step_kernel`'s default).

A method whose declared objective (`Target.local_objective`) is the cross-entropy of its model
on the normalised inputs (`Target.plain_forward`), with or without a proximal pull, that draws
no noise and steps every parameter by plain SGD at the recipe's rate, is trained by `dense` on
the zoo's MLP and by `conv` on its CNNs, when what the model declares it computes (`MLP.layout`,
`ConvNet.layout`: layers, activation, pooling, normalisation, padding, stride, bias) is what the
kernel computes (`dense.computes`, `conv.computes`) and the local parameters are exactly the
layers'. Anything else, a model that declares no layout among them, gets None: the batched
executors' generic `vmap(grad(local_loss))` path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedattack.kernels import conv, dense
from fedattack.kernels.base import StepKernel
from fedattack.kernels.conv import ConvKernel
from fedattack.kernels.dense import DenseKernel
from fedattack.kernels.proximal import has_anchors
from fedattack.models.zoo.cnn import ConvNet
from fedattack.models.zoo.mlp import MLP
from fedattack.optim import is_plain_sgd

if TYPE_CHECKING:
    from fedattack.target import LocalProblem, Target


def standard_kernel(target: Target, problem: LocalProblem) -> StepKernel | None:
    """`dense` or `conv` where they compute exactly this method's local training, else None."""
    objective = target.local_objective()
    if objective is None or not target.plain_forward or target.noise_shapes(problem):
        return None
    if objective.proximal and not has_anchors(problem.params, problem.consts):
        return None
    if not is_plain_sgd({n: target.optimizer(n) for n in problem.params}, target.recipe.lr):
        return None
    model, names = target.model, set(problem.params)
    if isinstance(model, MLP):
        mlp = model.layout()
        if mlp is not None and dense.computes(mlp) and names == _weights_and_biases(model.chain()):
            return DenseKernel(model.chain(), objective.proximal)
    if isinstance(model, ConvNet):
        cnn = model.layout()
        if cnn is not None and conv.computes(cnn) and names == _weights_and_biases(cnn.convs_and_fcs):
            return ConvKernel(cnn, objective.proximal)
    return None


def _weights_and_biases(layers: tuple[str, ...]) -> set[str]:
    return {f"{n}.{p}" for n in layers for p in ("weight", "bias")}
