"""WAFFLe (Hao et al., IEEE Access 2022) and its ablation, with everything that serves only them.

- `method.py`: `waffle-ibp`, the method; `recipe.py` its local recipes (the paper's, IBP-WF's,
  the searched one); `l1.py`: `waffle-l1`, the paper's non-Bayesian ablation;
- `factors.py`, `layers.py`: the shared dictionary of rank-1 factors and the private selection;
- `ibp.py`: the IBP prior, the variational posteriors and their KLs (what the loss calls);
- `kernel.py`: the batched executors' step for a stack of clients (`Target.step_kernel`), its
  step (`step.py`), its selection with the backward written out (`selection.py`), and the
  compiled variant, the kernel option "native" (`native_step.py`, `native.py`, `native.c`);
- `derivation.py`: the gradient all of these compute, written out once, which the tests hold
  autograd, the batched step and the compiled step to.
"""
