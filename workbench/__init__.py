"""GRPO Workbench: see and steer LoRA GRPO fine-tuning of language models.

Importing the package is cheap on purpose: the heavy libraries (torch,
transformers, trl, gradio) are imported only by the modules that need them,
so the calculator and the run-folder reader stay instant.
"""

__version__ = "0.1.0"
