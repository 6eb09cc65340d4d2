"""Reconstructing a client's training images and labels from its recorded update (issue #15).

Pure functions over a functional model (`forward(params, x)`, parameters as a name -> tensor
dict): label recovery (`labels`), single-step gradient matching (`gradient`), multi-step
FedAvg/FedProx update inversion (`fedavg`, simulating the local run in `local_run`), and
per-image metrics after matching (`image_metrics`). Nothing here registers an attack: the attack
classes that wrap these read the threat model's knowledge and the target's recipe.
"""
