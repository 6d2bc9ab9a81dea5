"""Tests for workbench/teach/losses.py: the loss formulas, and the same numbers as TRL's own loss."""

from __future__ import annotations

import pytest
import torch

from workbench.teach import losses

LENGTHS = (3, 7, 2, 8)  # completion lengths of one group of four: deliberately unequal
MAX_LEN = 8


@pytest.fixture
def batch():
    """One group of four completions with unequal lengths and advantages summing to zero."""
    torch.manual_seed(0)
    mask = torch.zeros(len(LENGTHS), MAX_LEN)
    for row, length in enumerate(LENGTHS):
        mask[row, :length] = 1
    rewards = torch.tensor([0.9, 0.2, 0.6, 0.1])
    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    logps = (-torch.rand(len(LENGTHS), MAX_LEN) * 3).requires_grad_()
    ref_logps = logps.detach() + 0.3 * torch.randn(len(LENGTHS), MAX_LEN)
    return {"logps": logps, "ref": ref_logps, "advantages": advantages, "mask": mask}


def test_per_token_loss_is_minus_advantage_on_policy(batch):
    loss = losses.per_token_policy_loss(batch["logps"], batch["advantages"])
    expected = -batch["advantages"].unsqueeze(1).expand_as(loss)
    assert torch.allclose(loss, expected)


@pytest.mark.parametrize(
    "log_ratio, advantage, expected",
    [(0.5, 1.0, -1.2), (0.5, -1.0, 1.6487), (-0.5, -1.0, 0.8), (-0.5, 1.0, -0.6065)],
    ids=[
        "high-ratio-positive-clipped",
        "high-ratio-negative-unclipped",
        "low-ratio-negative-clipped",
        "low-ratio-positive-unclipped",
    ],
)
def test_clipping_takes_the_pessimistic_side(log_ratio, advantage, expected):
    old = torch.zeros(1, 1)
    loss = losses.per_token_policy_loss(old + log_ratio, torch.tensor([advantage]), old_per_token_logps=old)
    assert loss.item() == pytest.approx(expected, abs=1e-4)


def test_k3_kl_is_zero_when_equal_and_never_negative(batch):
    assert torch.allclose(losses.k3_kl(batch["ref"], batch["ref"]), torch.zeros_like(batch["ref"]))
    assert (losses.k3_kl(batch["logps"], batch["ref"]) >= 0).all()


@pytest.mark.parametrize("loss_type", losses.LOSS_TYPES)
def test_token_weights_reproduce_the_aggregation(batch, loss_type):
    per_token = torch.randn_like(batch["mask"])
    aggregated = losses.aggregate(per_token, batch["mask"], loss_type, max_completion_length=MAX_LEN)
    weighted = (per_token * losses.token_weights(batch["mask"], loss_type, MAX_LEN)).sum()
    assert aggregated.item() == pytest.approx(weighted.item(), abs=1e-6)


def test_grpo_gives_every_completion_the_same_total_weight(batch):
    per_completion = losses.token_weights(batch["mask"], "grpo", MAX_LEN).sum(-1)
    assert torch.allclose(per_completion, torch.full((len(LENGTHS),), 1 / len(LENGTHS)))


@pytest.mark.parametrize(
    "loss_type, is_zero",
    [("grpo", True), ("bnpo", False), ("dr_grpo", False), ("dapo", False)],
    ids=["grpo-zero", "bnpo-nonzero", "dr_grpo-nonzero", "dapo-nonzero"],
)
def test_beta_zero_one_iteration_only_grpo_is_zero(batch, loss_type, is_zero):
    parts = losses.compute_loss(
        batch["logps"], batch["advantages"], batch["mask"], loss_type=loss_type, max_completion_length=MAX_LEN
    )
    assert (abs(parts.loss.item()) < 1e-5) is is_zero
    assert parts.kl_mean is None


@pytest.mark.parametrize("loss_type", losses.LOSS_TYPES)
def test_zero_advantages_give_zero_loss_and_zero_gradient(batch, loss_type):
    parts = losses.compute_loss(
        batch["logps"], torch.zeros(len(LENGTHS)), batch["mask"], loss_type=loss_type, max_completion_length=MAX_LEN
    )
    parts.loss.backward()
    assert parts.loss.item() == 0.0
    assert torch.count_nonzero(batch["logps"].grad) == 0


@pytest.mark.parametrize("loss_type", losses.LOSS_TYPES)
def test_kl_term_is_aggregated_like_the_policy_term(batch, loss_type):
    beta = 0.04
    parts = losses.compute_loss(
        batch["logps"],
        batch["advantages"],
        batch["mask"],
        loss_type=loss_type,
        beta=beta,
        ref_per_token_logps=batch["ref"],
        max_completion_length=MAX_LEN,
    )
    kl = losses.k3_kl(batch["logps"], batch["ref"])
    expected_kl = losses.aggregate(kl, batch["mask"], loss_type, max_completion_length=MAX_LEN)
    assert parts.kl_term.item() == pytest.approx(expected_kl.item(), rel=1e-6)
    assert parts.loss.item() == pytest.approx(parts.policy_term.item() + beta * parts.kl_term.item(), abs=1e-6)
    assert parts.kl_mean == pytest.approx(((kl * batch["mask"]).sum() / batch["mask"].sum()).item(), rel=1e-6)


@pytest.mark.parametrize("loss_type", losses.LOSS_TYPES)
def test_micro_batches_add_up_to_the_whole_batch_for_equal_token_counts(batch, loss_type):
    """Two micro-batches with the same token count (rows 0+1 and 2+3: 10 tokens each)."""
    per_token = torch.randn_like(batch["mask"])
    whole = losses.aggregate(per_token, batch["mask"], loss_type, max_completion_length=MAX_LEN)
    halves = [[0, 1], [2, 3]]
    total = sum(
        losses.aggregate(
            per_token[rows],
            batch["mask"][rows],
            loss_type,
            max_completion_length=MAX_LEN,
            num_items_in_batch=batch["mask"].sum(),
            gradient_accumulation_steps=2,
            steps_per_generation=2,
        )
        for rows in halves
    )
    assert total.item() == pytest.approx(whole.item(), abs=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"loss_type": "ppo"}, "loss_type"),
        ({"loss_type": "dr_grpo"}, "max_completion_length"),
        ({"beta": 0.04}, "ref_per_token_logps"),
        ({"beta": -1.0}, "beta"),
    ],
    ids=["unknown-loss-type", "dr_grpo-without-length", "kl-without-reference", "negative-beta"],
)
def test_bad_arguments_name_the_field(batch, kwargs, match):
    with pytest.raises(losses.LossInputError, match=match):
        losses.compute_loss(batch["logps"], batch["advantages"], batch["mask"], **kwargs)


def test_compare_loss_types_has_one_row_per_type(batch):
    rows = losses.compare_loss_types(batch["logps"], batch["advantages"], batch["mask"], MAX_LEN)
    assert [row["loss_type"] for row in rows] == list(losses.LOSS_TYPES)
    assert all(row["rule"] for row in rows)


# --- the variants' knobs: clip-higher (DAPO) and the sequence-level ratio (GSPO) -------


@pytest.fixture
def off_policy(batch):
    """The batch with old log-probs the policy has moved away from: some tokens and completions clip low, some high."""
    torch.manual_seed(1)
    logps = batch["logps"].detach()
    # rows drift apart in both directions, so every clip side has work to do at both levels
    shift = torch.tensor([-0.3, 0.3, -0.25, 0.35]).unsqueeze(1)
    old = logps + shift + 0.4 * torch.randn_like(logps)
    advantages = torch.tensor([1.2, -0.5, 0.3, -1.0])
    return {"logps": logps, "old": old, "advantages": advantages, "mask": batch["mask"]}


def test_sequence_ratio_is_the_geometric_mean_of_the_token_ratios(off_policy):
    ratio = losses.importance_ratio(off_policy["logps"], off_policy["old"], off_policy["mask"], "sequence")
    token = losses.importance_ratio(off_policy["logps"], off_policy["old"])
    for row, length in enumerate(LENGTHS):
        expected = torch.prod(token[row, :length]) ** (1 / length)
        assert ratio[row, 0].item() == pytest.approx(expected.item(), rel=1e-5)


def test_on_policy_the_variants_change_nothing(batch):
    """Old log-probs equal to the new ones (TRL's on-policy default): every variant gives the same loss."""
    rows = losses.compare_variants(
        batch["logps"].detach(),
        batch["logps"].detach(),
        batch["advantages"],
        batch["mask"],
        max_completion_length=MAX_LEN,
    )
    assert len({round(row["loss"], 7) for row in rows}) == 1
    assert all(row["clip_region_mean"] == 0 for row in rows)


def test_clip_higher_lets_positive_tokens_rise_further():
    old = torch.zeros(1, 1)
    up = losses.per_token_policy_loss(old + 0.22, torch.tensor([1.0]), old_per_token_logps=old)  # ratio 1.246
    higher = losses.per_token_policy_loss(old + 0.22, torch.tensor([1.0]), old_per_token_logps=old, epsilon_high=0.28)
    assert up.item() == pytest.approx(-1.2) and higher.item() == pytest.approx(-1.2461, abs=1e-4)


def test_sequence_level_needs_the_mask_and_a_known_level(off_policy):
    with pytest.raises(losses.LossInputError, match="completion_mask"):
        losses.importance_ratio(off_policy["logps"], off_policy["old"], None, "sequence")
    with pytest.raises(losses.LossInputError, match="importance_sampling_level"):
        losses.importance_ratio(off_policy["logps"], off_policy["old"], off_policy["mask"], "word")


@pytest.fixture(scope="module")
def trl_loss():
    """TRL 1.16's own `_compute_loss` on given tensors (imports TRL once for the module)."""
    from workbench.teach.trl_loss import trl_loss

    return trl_loss


@pytest.mark.parametrize("loss_type", losses.LOSS_TYPES)
@pytest.mark.parametrize("variant", list(losses.VARIANTS))
def test_variants_match_trls_own_loss_and_clip_ratios(off_policy, trl_loss, loss_type, variant):
    knobs = losses.VARIANTS[variant]
    trl_value, metrics = trl_loss(
        off_policy["logps"],
        off_policy["old"],
        off_policy["advantages"],
        off_policy["mask"],
        loss_type=loss_type,
        epsilon=knobs["epsilon_low"],
        epsilon_high=knobs["epsilon_high"],
        importance_sampling_level=knobs["importance_sampling_level"],
        max_completion_length=MAX_LEN,
    )
    ours = losses.compute_loss(
        off_policy["logps"],
        off_policy["advantages"],
        off_policy["mask"],
        loss_type=loss_type,
        old_per_token_logps=off_policy["old"],
        max_completion_length=MAX_LEN,
        **knobs,
    )
    assert ours.loss.item() == pytest.approx(trl_value, abs=1e-6)
    ratio = losses.importance_ratio(
        off_policy["logps"], off_policy["old"], off_policy["mask"], knobs["importance_sampling_level"]
    )
    clipped = losses.clip_fractions(
        ratio, off_policy["advantages"], off_policy["mask"], knobs["epsilon_low"], knobs["epsilon_high"]
    )
    for side in ("low_mean", "high_mean", "region_mean"):
        assert clipped[side] == pytest.approx(metrics[f"clip_ratio/{side}"], abs=1e-6), side
    assert clipped["region_mean"] > 0  # the batch really is off-policy enough to clip


def test_each_variant_gives_a_different_loss_off_policy(off_policy):
    rows = losses.compare_variants(
        off_policy["logps"],
        off_policy["old"],
        off_policy["advantages"],
        off_policy["mask"],
        max_completion_length=MAX_LEN,
    )
    assert len({round(row["loss"], 6) for row in rows}) == len(losses.VARIANTS)


# --- against TRL itself, through workbench.teach.loss_probe ---------------------------


@pytest.fixture(scope="module")
def probe_run_factory(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from workbench.sources.model_files import tiny_model_dir
    from workbench.spec.rewards import get_reward
    from workbench.spec.tasks import load_task_dataset
    from workbench.teach.loss_probe import loss_probe_trainer_class

    trainer_class = loss_probe_trainer_class()

    def run(loss_type: str, gradient_accumulation_steps: int):
        model_dir = str(tiny_model_dir())
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        # The random tiny model almost never samples its real end token; treat
        # ~12% of the vocabulary as stop tokens so completion lengths differ,
        # which is what makes the four loss types disagree.
        model.generation_config.eos_token_id = list(range(2, 6000))
        args = GRPOConfig(
            output_dir=str(tmp_path_factory.mktemp("probe")),
            per_device_train_batch_size=4,
            gradient_accumulation_steps=gradient_accumulation_steps,
            num_generations=4,
            max_completion_length=12,
            max_steps=2,  # step 2 runs on an updated policy, so the KL is no longer 0
            loss_type=loss_type,
            beta=0.04,
            learning_rate=1e-2,
            bf16=False,  # CPU: float32 (TRL defaults to bf16)
            gradient_checkpointing=False,  # costs time on a tiny model
            use_cpu=True,
            report_to="none",
            logging_steps=1,
            save_strategy="no",
            seed=0,
        )
        trainer = trainer_class(
            model=model,
            args=args,
            train_dataset=load_task_dataset("demo", size=16),
            reward_funcs=[get_reward("brevity")],
            processing_class=AutoTokenizer.from_pretrained(model_dir),
        )
        trainer.train()
        logged = [entry for entry in trainer.state.log_history if "loss" in entry and "train_loss" not in entry]
        return trainer.probes, logged

    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    "loss_type, gradient_accumulation_steps",
    [("grpo", 1), ("dapo", 2)],
    ids=["grpo-one-micro-batch", "dapo-two-micro-batches"],
)
def test_matches_trl_loss_for_every_type_and_the_logged_loss(probe_run_factory, loss_type, gradient_accumulation_steps):
    probes, logged = probe_run_factory(loss_type, gradient_accumulation_steps)
    assert len(probes) == 2 * gradient_accumulation_steps
    for probe in probes:
        for each_type in losses.LOSS_TYPES:
            assert probe.ours[each_type]["loss"] == pytest.approx(probe.trl[each_type], abs=1e-5), each_type
    # The logged loss of an optimizer step is the sum of its micro-batch values.
    assert len(logged) == 2
    for step, entry in enumerate(logged):
        window = probes[step * gradient_accumulation_steps : (step + 1) * gradient_accumulation_steps]
        assert entry["loss"] == pytest.approx(sum(p.ours[loss_type]["loss"] for p in window), abs=1e-5)
        kl_means = [p.ours[loss_type]["kl_mean"] for p in window]
        assert entry["kl"] == pytest.approx(sum(kl_means) / len(kl_means), abs=1e-7)
    assert logged[1]["kl"] > 0  # the second step really compares two different policies
