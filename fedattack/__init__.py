"""fedattack: what does an attacker learn from the messages a federated-learning method puts on the wire?"""

__version__ = "0.1.0"
