"""Teaching aids behind the notebooks: GRPO's loss types computed by hand and checked against TRL.

- `losses`      the four loss normalisations on a grid of tokens, in plain torch
- `loss_probe`  a GRPOTrainer subclass that records TRL's own loss for comparison
"""
