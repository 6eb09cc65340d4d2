"""Step kernels: how a method trains many clients at once (see `fedattack.kernels.base`)."""

from fedattack.kernels.base import Chunking, Stack, StepKernel, gather

__all__ = ["Chunking", "Stack", "StepKernel", "gather"]
