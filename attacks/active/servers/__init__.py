"""Active threat models: servers that choose what they send (see `fedattack.federation.active`).

One module per attack, each registering itself: `imprint` (Fowl et al. 2022), `trap-weights`
(Boenisch et al. 2023), `model-inconsistency` (Pasquini et al. 2022). Modules starting with an
underscore hold what they share and register nothing.
"""
