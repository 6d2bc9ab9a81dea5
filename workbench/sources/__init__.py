"""Reading the outside world for a run: where a model lives and its conversion, datasets and their download, GPUs.

- `model_files`      model names to folders: the bundled GGUF converted once, the tiny model, folders, hub ids
- `dataset_reading`  a person's data files (JSONL, JSON, CSV, Parquet, a `datasets` folder)
- `hub_datasets`     what `dataset_name` names (hub id, hub-layout folder, save_to_disk folder, file) and its reading
- `dataset_files`    every file a dataset name makes a reader open, held to a rule before a row is read
- `gpus`             the GPUs NVML sees, CUDA_VISIBLE_DEVICES, whether a run trains on the CPU

Below spec/: spec describes and checks a run and may call these readers; nothing here imports another part of the
workbench. The heavy libraries (transformers, datasets, huggingface_hub, pynvml) are imported inside the functions
that use them, so importing a module here stays cheap.
"""
