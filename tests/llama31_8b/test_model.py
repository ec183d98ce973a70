"""The model against an independent implementation: transformers' LlamaForCausalLM with the same
weights (a tiny config with GQA and Llama 3.1's RoPE scaling in force), and its shape facts."""

from __future__ import annotations

import pytest
import torch

from workloads.llama31_8b.model import LLAMA31_8B, Llama, Shape, rope_frequencies

transformers = pytest.importorskip("transformers")

TINY = Shape(vocab=97, dim=128, layers=2, heads=8, kv_heads=2, ffn=96, seq_len=48, rope_theta=10_000.0,
             rope_original_context=32)
"""Head width 16, four queries per key/value head; an original context of 32 tokens puts the
RoPE wavelengths (6.3, 19.9, 62.8, ... tokens) in each of the scaling's three regions: kept (below
32 / 4), blended (between), divided by the factor (above 32)."""


def reference(shape: Shape) -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=shape.vocab, hidden_size=shape.dim, intermediate_size=shape.ffn,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.seq_len, rms_norm_eps=shape.norm_eps, rope_theta=shape.rope_theta,
        rope_scaling={"rope_type": "llama3", "factor": shape.rope_factor,
                      "low_freq_factor": shape.rope_low_freq_factor, "high_freq_factor": shape.rope_high_freq_factor,
                      "original_max_position_embeddings": shape.rope_original_context},
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, hidden_act="silu",
        attn_implementation="eager", torch_dtype=torch.float32,
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_logits_match_transformers_llama_with_the_same_weights():
    torch.manual_seed(0)
    ours = Llama(TINY).eval()
    theirs = reference(TINY)
    state = {f"model.{name}" if not name.startswith("lm_head") else name: value
             for name, value in ours.state_dict().items()}
    missing, unexpected = theirs.load_state_dict(state, strict=False)
    assert not unexpected and all("rotary_emb" in name for name in missing), (missing, unexpected)
    tokens = torch.randint(0, TINY.vocab, (2, TINY.seq_len))
    with torch.no_grad():
        mine, other = ours(tokens), theirs(tokens).logits
    assert mine.shape == other.shape == (2, TINY.seq_len, TINY.vocab)
    torch.testing.assert_close(mine, other, rtol=1e-4, atol=1e-4)
    # the scaling is in force: some frequencies are divided, some blended, some kept
    plain = 1.0 / (TINY.rope_theta ** (torch.arange(0, TINY.head_dim, 2, dtype=torch.float64) / TINY.head_dim))
    ratio = (plain.float() / rope_frequencies(TINY)).tolist()
    assert ratio[0] == pytest.approx(1.0) and ratio[-1] == pytest.approx(TINY.rope_factor)
    assert any(1.01 < r < TINY.rope_factor - 0.01 for r in ratio)


def test_the_benchmark_shape_is_llama_3_1_8b():
    shape = LLAMA31_8B
    assert (shape.layers, shape.dim, shape.heads, shape.kv_heads, shape.ffn, shape.vocab, shape.seq_len) == (
        32, 4096, 32, 8, 14336, 128256, 8192)
    assert shape.parameters() == 8_030_261_248  # Meta's Llama 3.1 8B parameter count
    matmul = 8_030_261_248 - 128256 * 4096 - 65 * 4096  # less the embedding lookup and the norms
    assert matmul == 7_504_658_432 and shape.train_flops_per_token() == 6 * matmul + 6 * 32 * 8192 * 4096


def test_a_shape_that_does_not_split_into_heads_is_refused():
    with pytest.raises(ValueError, match="heads"):
        Shape(dim=60, heads=8)
