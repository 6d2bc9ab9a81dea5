"""Memory estimate: shapes from config.json, each term's arithmetic, bad input, and real measurements."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.spec import memory

REPO = Path(__file__).resolve().parents[1]


def llama_config(**overrides):
    """A transformers config.json dict shaped like SmolLM2-135M-Instruct."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "vocab_size": 49152,
        "tie_word_embeddings": True,
        "max_position_embeddings": 8192,
    }
    config.update(overrides)
    return config


@pytest.fixture
def smollm2():
    return memory.model_shape(llama_config())


def estimate(shape, **settings):
    defaults = dict(
        per_device_train_batch_size=8, num_generations=8, max_prompt_length=40, max_completion_length=48, beta=0.04
    )
    return memory.estimate_memory(shape, **{**defaults, **settings})


def term(result, name):
    return next(t for t in result.terms if t.name == name)


# ---------------------------------------------------------------- shape


def test_shape_and_parameter_count_of_smollm2(smollm2):
    assert smollm2.kv_size == 192 and smollm2.attention_size == 576
    # 28.3M tied embeddings + 30 x 3.54M per layer + the final norm: SmolLM2's 134.5M
    assert smollm2.parameter_count() == 134_515_008


def test_from_model_dir_reads_config_json_only(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(llama_config(tie_word_embeddings=False)))
    shape = memory.from_model_dir(tmp_path)
    assert shape.parameter_count() == 134_515_008 + 49152 * 576


@pytest.mark.parametrize(
    "config, field",
    [
        ({"hidden_size": 8, "num_attention_heads": 2}, "num_hidden_layers"),
        ({"n_layer": 2, "n_head": 2, "vocab_size": 10}, "hidden_size"),
    ],
    ids=["no-layers", "no-hidden"],
)
def test_incomplete_config_names_the_missing_field(config, field):
    with pytest.raises(memory.MemoryInputError, match=rf"^{field}: missing"):
        memory.model_shape(config)


def test_missing_or_broken_model_folder(tmp_path):
    with pytest.raises(memory.MemoryInputError, match="no config.json"):
        memory.from_model_dir(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(memory.MemoryInputError, match="not valid JSON"):
        memory.from_model_dir(tmp_path)


def test_gpt2_style_names_are_understood():
    shape = memory.model_shape({"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100})
    assert (shape.hidden_size, shape.intermediate_size, shape.head_dim) == (64, 256, 16)


# ---------------------------------------------------------------- terms


def test_lora_term_counts_adapter_and_adam_state(smollm2):
    result = estimate(smollm2, lora_r=16)
    params = 30 * 16 * sum(i + o for i, o in smollm2.linear_shapes().values())
    assert params == 4_884_480
    assert term(result, "lora").bytes == params * 16
    only_qv = estimate(smollm2, lora_target_modules="q_proj, v_proj")
    assert term(only_qv, "lora").bytes == 30 * 16 * (576 + 576 + 576 + 192) * 16


def test_weights_follow_dtype(smollm2):
    assert term(estimate(smollm2, dtype_bytes=2), "weights").bytes == 134_515_008 * 2


def test_activations_grow_with_batch_and_length(smollm2):
    base = term(estimate(smollm2, per_device_train_batch_size=4), "activations").bytes
    assert term(estimate(smollm2, per_device_train_batch_size=8), "activations").bytes == 2 * base
    # Doubling prompt + completion doubles the tokens; the attention mask row adds a little more.
    longer = term(
        estimate(smollm2, per_device_train_batch_size=4, max_prompt_length=80, max_completion_length=96), "activations"
    ).bytes
    assert 2.0 < longer / base < 2.05


def test_beta_zero_has_no_reference_pass(smollm2):
    assert not any(t.name == "reference forward" for t in estimate(smollm2, beta=0.0).terms)
    assert term(estimate(smollm2, beta=0.04), "reference forward").phase == "scoring"
    # Reference log-probs reuse the base weights: there is one weights term either way.
    assert [t.name for t in estimate(smollm2, beta=0.04).terms].count("weights") == 1
    assert any(t.name == "reference forward" for t in estimate(smollm2, beta=0.0, num_iterations=2).terms)


def test_logits_are_tiled_not_full(smollm2):
    result = estimate(smollm2, per_device_train_batch_size=64, max_completion_length=512)
    tiles = term(result, "logits tiles").bytes
    assert tiles == memory.TOKEN_TILE * memory.VOCAB_TILE * 4 * memory.LOGIT_TILE_COPIES["cpu"]["backward"]
    assert tiles < 64 * 552 * 49152 * 4  # far below the full logits
    # on a GPU, TRL's Triton kernels fold one tile at a time
    assert (
        term(
            estimate(smollm2, per_device_train_batch_size=64, max_completion_length=512, device="cuda"), "logits tiles"
        ).bytes
        == memory.TOKEN_TILE * memory.VOCAB_TILE * 4
    )


def test_the_cuda_estimate_meets_the_peaks_measured_on_an_h100(smollm2):
    """Recorded by benchmarks/bench_memory.py --device cuda on an H100 (tests/data/gpu_memory_h100.json):
    the estimate within the GPU kit's 15 % of the card's measured peak and at most 10 % under it, the
    context term as measured, and the LM head's backward about one tile."""
    recorded = json.loads((REPO / "tests" / "data" / "gpu_memory_h100.json").read_text())
    for row in recorded["rows"]:
        setting = {k: v for k, v in row["setting"].items() if k != "device"}
        result = memory.estimate_memory(
            smollm2, device="cuda", dtype_bytes=4, max_prompt_length=row["max_prompt_tokens"], **setting
        )
        error = result.total_bytes / row["nvml_peak_bytes"] - 1
        # within the kit's 15%, and never far under: an estimate under the peak says a run fits that does not
        assert -0.10 <= error <= 0.15, (row["name"], error, result.breakdown())
        # the CUDA context: what the card held beyond torch's own reserve
        assert term(result, "runtime").bytes == pytest.approx(
            row["nvml_peak_bytes"] - row["cuda_peak_reserved"], rel=0.01
        )
        # the LM head's backward: about one tile above what the backward began with
        assert term(result, "logits tiles").bytes == pytest.approx(row["cuda_phase_peaks"]["backward"], rel=0.35)
        assert result.peak_phase == "training"


def test_total_is_always_alive_plus_the_largest_phase(smollm2):
    result = estimate(smollm2)
    always = sum(t.bytes for t in result.terms if t.phase == "always")
    largest = max(result.phase_bytes(p) for p in ("generation", "scoring", "training"))
    assert result.total_bytes == always + largest and result.peak_phase == "training"


def test_generation_batch_covers_steps_per_generation(smollm2):
    one = term(estimate(smollm2, gradient_accumulation_steps=1), "kv cache").bytes
    four = term(estimate(smollm2, gradient_accumulation_steps=4), "kv cache").bytes
    assert four == 4 * one == 4 * 2 * 30 * 192 * 88 * 8 * 4


def test_gradient_checkpointing_saves_activations(smollm2):
    plain = term(estimate(smollm2), "activations").bytes
    checkpointed = term(estimate(smollm2, gradient_checkpointing=True), "activations").bytes
    assert checkpointed < plain / 5


def test_vllm_server_and_colocate(smollm2):
    server = estimate(smollm2, device="cuda", dtype_bytes=2, use_vllm=True, vllm_mode="server")
    assert term(server, "generation").bytes == 0
    colocate = estimate(
        smollm2,
        device="cuda",
        dtype_bytes=2,
        use_vllm=True,
        device_total_bytes=80 * memory.GIB,
        vllm_gpu_memory_utilization=0.3,
    )
    assert term(colocate, "vllm").bytes == int(0.3 * 80 * memory.GIB) and term(colocate, "vllm").phase == "always"
    assert any("device_total_bytes" in n for n in estimate(smollm2, device="cuda", use_vllm=True).notes)


def test_fit_warning_names_the_fixes(smollm2):
    result = estimate(smollm2)
    assert result.check_fits(None) is None and result.check_fits(100 * memory.GIB) is None
    warning = result.check_fits(memory.GIB)
    assert "GiB free" in warning and "gradient_checkpointing" in warning


def test_breakdown_and_dict_are_plain_data(smollm2):
    result = estimate(smollm2)
    json.dumps(result.to_dict())
    assert {row["term"] for row in result.breakdown()} >= {"runtime", "weights", "lora", "activations"}


@pytest.mark.parametrize(
    "settings, field",
    [
        ({"per_device_train_batch_size": 0}, "per_device_train_batch_size"),
        ({"max_completion_length": 2.5}, "max_completion_length"),
        ({"lora_r": True}, "lora_r"),
        ({"lora_target_modules": "c_attn"}, "lora_target_modules"),
        ({"dtype_bytes": 3}, "dtype_bytes"),
        ({"device": "tpu"}, "device"),
    ],
    ids=["zero-batch", "fractional-length", "bool-rank", "unknown-module", "odd-dtype", "unknown-device"],
)
def test_bad_settings_name_the_field(smollm2, settings, field):
    with pytest.raises(memory.MemoryInputError, match=rf"^{field}: "):
        estimate(smollm2, **settings)


def test_estimate_for_run_config_uses_its_fields(smollm2):
    from workbench.spec.config import RunConfig

    config = RunConfig()
    result = memory.estimate_for_config(config, smollm2, max_prompt_length=40)
    direct = estimate(
        smollm2,
        per_device_train_batch_size=config.per_device_train_batch_size,
        max_completion_length=config.max_completion_length,
        lora_r=config.lora_r,
        merged_copy_dtype_bytes=4,
        packed_decode=True,
    )  # auto on a CPU: a float32 copy, packed
    assert result.total_bytes == direct.total_bytes
    # sampling from the policy itself: no copy, and so nothing packed
    bare = memory.estimate_for_config(config.with_changes(merged_generation="no"), smollm2, max_prompt_length=40)
    copy = next(t for t in result.terms if t.name == "merged copy")
    packed = next(t for t in result.terms if t.name == "packed weights")
    assert result.total_bytes - bare.total_bytes == copy.bytes + packed.bytes
    assert copy.bytes == next(t for t in result.terms if t.name == "weights").bytes
    # packed: every linear weight and the LM head (tied to the embeddings, so counted once among the weights)
    shape = smollm2
    assert packed.bytes == 4 * (
        shape.parameter_count() - shape.num_hidden_layers * 2 * shape.hidden_size - shape.hidden_size
    )
    unpacked = memory.estimate_for_config(config.with_changes(packed_decode="no"), smollm2, max_prompt_length=40)
    assert result.total_bytes - unpacked.total_bytes == packed.bytes


# ---------------------------------------------------------------- against the real thing


@pytest.mark.slow
def test_shape_counts_match_the_real_model_and_peft():
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from workbench.sources.model_files import tiny_model_dir

    folder = tiny_model_dir()
    shape = memory.from_model_dir(folder)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    assert shape.parameter_count() == model.num_parameters()
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    lora = term(memory.estimate_memory(shape, lora_r=4), "lora").bytes / memory.LORA_BYTES_PER_PARAM
    assert lora == trainable


@pytest.mark.slow
def test_activation_formula_matches_saved_tensors():
    """Count what autograd really keeps for backward (the tiny Llama with LoRA) against the formula."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from workbench.sources.model_files import tiny_model_dir

    folder = tiny_model_dir()
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages = {}

    def keep(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    batch, seq = 4, 64
    ids = torch.randint(0, 1000, (batch, seq))
    mask = torch.ones_like(ids)
    mask[0, :10] = 0  # left padding, as every GRPO batch of prompts of different lengths has
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        model(input_ids=ids, attention_mask=mask).logits.sum()
    shape = memory.from_model_dir(folder)
    result = memory.estimate_memory(
        shape, lora_r=4, per_device_train_batch_size=batch, max_prompt_length=seq // 2, max_completion_length=seq // 2
    )
    # The count also holds the embedding output and the final norm's input and output (3 hidden per token).
    saved = sum(storages.values()) - 3 * batch * seq * shape.hidden_size * 4
    assert term(result, "activations").bytes == pytest.approx(saved, rel=0.15)


@pytest.mark.slow
def test_estimate_within_30_percent_of_a_real_cpu_run():
    """One real short GRPO run of the bundled model (benchmarks/bench_memory.py) against the estimate."""
    result = subprocess.run(
        [sys.executable, "benchmarks/bench_memory.py", "--only", "g4-len32", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert result.returncode in (0, 1), result.stderr[-3000:]
    row = json.loads(result.stdout.strip().splitlines()[-1])
    assert abs(row["relative_error"]) <= 0.30, row


def test_a_reward_model_counts_its_weights_for_the_run_and_its_forward_when_scoring(smollm2, tmp_path):
    folder = tmp_path / "reward-model"
    folder.mkdir()
    config = {
        **llama_config(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            vocab_size=1000,
            tie_word_embeddings=False,
        ),
        "architectures": ["LlamaForSequenceClassification"],
        "dtype": "bfloat16",
    }
    (folder / "config.json").write_text(json.dumps(config))
    settings = {"per_device_train_batch_size": 8, "num_generations": 8, "max_completion_length": 48}
    without = memory.estimate_for_config(settings, smollm2, max_prompt_length=64)
    with_model = memory.estimate_for_config({**settings, "reward_model": str(folder)}, smollm2, max_prompt_length=64)
    weights = term(with_model, "reward model")
    shape = memory.model_shape(config)
    # no LM head (a one-number score head), in the dtype it was saved in
    assert weights.bytes == (shape.parameter_count() - 1000 * 64) * 2 and weights.phase == "always"
    forward = term(with_model, "reward model forward")
    assert forward.phase == "scoring" and "896 tokens" in forward.explanation  # 8 sequences x (64 + 48) tokens
    assert with_model.total_bytes >= without.total_bytes + weights.bytes
    # a hub id's config is not on disk: not counted, and the estimate says so
    hub = memory.estimate_for_config({**settings, "reward_model": "org/reward-model"}, smollm2, max_prompt_length=64)
    assert hub.total_bytes == without.total_bytes
    assert any("reward_model org/reward-model is not a local folder" in note for note in hub.notes)
