"""Model names: the bundled model converts once, tiny really is a tiny Llama, bad names are refused cheaply."""

import pytest

from workbench.sources import model_files


@pytest.mark.slow
def test_bundled_model_is_converted_once_to_a_plain_safetensors_folder():
    """Later loads read safetensors (under a second), not the GGUF file (about 25 s of de-quantising)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = model_files.bundled_model_dir()  # converts on first use
    assert (path / "model.safetensors").is_file() and not list(path.glob("*.gguf"))
    config = AutoConfig.from_pretrained(path)
    assert config.model_type == "llama" and getattr(config, "quantization_config", None) is None
    assert model_files.bundled_model_dir() == path  # the second call finds the cache
    model = AutoModelForCausalLM.from_pretrained(path)
    assert sum(p.numel() for p in model.parameters()) > 100_000_000


@pytest.mark.slow
def test_tiny_model_is_a_real_small_llama_with_a_chat_template():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = model_files.tiny_model_dir()
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert model.config.hidden_size == 16 and model.config.num_hidden_layers == 2
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert "hi" in text and text != "hi"
    ids = tokenizer("hello world", return_tensors="pt").input_ids
    assert model(ids).logits.shape[-1] == len(tokenizer)


@pytest.mark.parametrize(
    "name, match",
    [
        ("/no/such/folder", "does not exist"),
        ("./missing-model", "does not exist"),
        ("not a model!", "neither a folder nor a hub id"),
    ],
    ids=["absolute-path", "relative-path", "garbage"],
)
def test_bad_model_names_are_refused_without_loading(name, match):
    with pytest.raises(model_files.ModelError, match=match):
        model_files.check_model(name)


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(model_files.ModelError, match="no config.json"):
        model_files.check_model(str(tmp_path))


@pytest.mark.parametrize(
    "name",
    ["", "smollm2-135m-instruct", "tiny", "Qwen/Qwen2-0.5B-Instruct"],
    ids=["empty", "bundled", "tiny", "hub-id"],
)
def test_good_model_names_pass_the_cheap_check(name):
    model_files.check_model(name)
