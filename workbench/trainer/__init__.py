"""What runs inside the training process: TRL's GRPOTrainer with a PEFT LoRA adapter.

- `training`  builds the model, dataset, rewards and GRPOTrainer from a RunConfig and trains
- `recorder`  the trainer callback and reward wrappers that write the run folder as it goes
"""
