"""What runs inside the training process: TRL's GRPOTrainer with a PEFT LoRA adapter.

- `training`       a run's lifecycle: builds the model, dataset, rewards and GRPOTrainer from a RunConfig and trains
- `run_pieces`     the model, dataset, rewards, LoRA config and GRPOConfig a run's trainer is built from
- `grpo_subclass`  the workbench's GRPOTrainer over TRL's private hooks, and the check of those ties
- `speed_wiring`   the speed choice before the model loads, and its levers attached to the trainer
- `process_group`  the end of a multi-process run (torch.distributed's group closed, the process ended at once)
- `recorder`       the trainer callback and reward wrappers that write the run folder as it goes
"""
