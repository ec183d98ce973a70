"""Llama 3.1 as MLCommons' small-LLM pretraining reference defines it (NeMo's ``Llama31Config8B``):
pre-norm decoder blocks of grouped-query attention and a SwiGLU MLP, RMSNorm, rotary position
embeddings with Llama 3.1's frequency scaling, no biases, separate input embedding and output layer.

``Shape`` holds the architecture; ``LLAMA31_8B`` is the benchmark's. Attention is PyTorch's
``scaled_dot_product_attention`` (causal; flash or memory-efficient kernels on a GPU). Rotary
embeddings rotate the two halves of each head (``rotate_half``, as Megatron and Hugging Face do),
so weights map one to one onto ``transformers``' ``LlamaForCausalLM`` (the test compares logits).

Initialisation is Megatron's: every weight normal with std ``init_std`` (0.02), the two projections
that write into the residual stream (attention output, MLP down) with ``init_std / sqrt(2 * layers)``,
norms at one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


@dataclass(frozen=True, kw_only=True)
class Shape:
    """The architecture of one Llama model."""

    vocab: int = 128_256
    """Tokens of the Llama 3 tokenizer."""
    dim: int = 4096
    """Model (residual stream) width."""
    layers: int = 32
    """Decoder blocks."""
    heads: int = 32
    """Query heads."""
    kv_heads: int = 8
    """Key/value heads (grouped-query attention: heads / kv_heads queries share one)."""
    ffn: int = 14_336
    """SwiGLU hidden width."""
    seq_len: int = 8192
    """Context length trained on."""
    norm_eps: float = 1e-5
    rope_theta: float = 500_000.0
    rope_factor: float = 8.0
    """Llama 3.1 RoPE scaling: low frequencies divided by this."""
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_context: int = 8192
    init_std: float = 0.02

    def __post_init__(self) -> None:
        if min(self.vocab, self.dim, self.layers, self.heads, self.kv_heads, self.ffn, self.seq_len) < 1:
            raise ValueError(f"every size of a model shape must be positive: {self}")
        if self.dim % self.heads or self.heads % self.kv_heads or (self.dim // self.heads) % 2:
            raise ValueError(f"dim {self.dim} must split into {self.heads} heads of even width, and the heads "
                             f"into {self.kv_heads} key/value groups")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def parameters(self) -> int:
        """Parameters of the model (embedding and output layer counted apart: they are not tied)."""
        kv = self.kv_heads * self.head_dim
        block = 2 * self.dim * self.dim + 2 * self.dim * kv + 3 * self.dim * self.ffn + 2 * self.dim
        return self.layers * block + 2 * self.vocab * self.dim + self.dim

    def train_flops_per_token(self) -> float:
        """Model FLOPs of one trained token (forward and backward, no recomputation): 6 per matmul
        parameter plus the causal attention's 6 * layers * seq_len * dim (half of the full 12, as
        Megatron's and torchtitan's MFU count it)."""
        matmul = self.parameters() - self.vocab * self.dim - (2 * self.layers + 1) * self.dim
        return 6.0 * matmul + 6.0 * self.layers * self.seq_len * self.dim


LLAMA31_8B = Shape()
"""The benchmark's model: 32 layers, dim 4096, 32 heads, 8 KV heads, FFN 14336, vocab 128256, context 8192."""


def rope_frequencies(shape: Shape) -> torch.Tensor:
    """Inverse frequencies of the rotary embedding (head_dim / 2 of them) with Llama 3.1's scaling:
    wavelengths longer than ``original_context / low_freq_factor`` are divided by ``factor``, shorter
    than ``original_context / high_freq_factor`` kept, those between interpolated smoothly."""
    half = torch.arange(0, shape.head_dim, 2, dtype=torch.float64) / shape.head_dim
    inv = 1.0 / (shape.rope_theta ** half)
    wavelength = 2 * math.pi / inv
    low_wavelength = shape.rope_original_context / shape.rope_low_freq_factor
    high_wavelength = shape.rope_original_context / shape.rope_high_freq_factor
    scaled = torch.where(wavelength > low_wavelength, inv / shape.rope_factor, inv)
    smooth = ((shape.rope_original_context / wavelength - shape.rope_low_freq_factor)
              / (shape.rope_high_freq_factor - shape.rope_low_freq_factor))
    between = (wavelength <= low_wavelength) & (wavelength >= high_wavelength)
    blended = (1 - smooth) * scaled / shape.rope_factor + smooth * scaled
    return torch.where(between, blended, scaled).to(torch.float32)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, computed in fp32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * normed).to(x.dtype) if x.dtype != torch.float32 else self.weight * normed


def _gqa_keyword() -> bool:
    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    return (major, minor) >= (2, 5)


class Attention(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, shape.head_dim
        self.q_proj = nn.Linear(shape.dim, shape.heads * shape.head_dim, bias=False)
        self.k_proj = nn.Linear(shape.dim, shape.kv_heads * shape.head_dim, bias=False)
        self.v_proj = nn.Linear(shape.dim, shape.kv_heads * shape.head_dim, bias=False)
        self.o_proj = nn.Linear(shape.heads * shape.head_dim, shape.dim, bias=False)
        self.native_gqa = _gqa_keyword()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        q = (q * cos + rotate_half(q) * sin).to(v.dtype)
        k = (k * cos + rotate_half(k) * sin).to(v.dtype)
        if self.native_gqa:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.heads != self.kv_heads)
        else:
            groups = self.heads // self.kv_heads
            out = F.scaled_dot_product_attention(q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1),
                                                 is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(shape.dim, shape.ffn, bias=False)
        self.up_proj = nn.Linear(shape.dim, shape.ffn, bias=False)
        self.down_proj = nn.Linear(shape.ffn, shape.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(shape.dim, shape.norm_eps)
        self.self_attn = Attention(shape)
        self.post_attention_layernorm = RMSNorm(shape.dim, shape.norm_eps)
        self.mlp = MLP(shape)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """Tokens (batch, length) -> logits (batch, length, vocab). ``checkpointing``: recompute each
    block's activations in the backward pass (activation checkpointing) instead of keeping them."""

    def __init__(self, shape: Shape, *, checkpointing: bool = False) -> None:
        super().__init__()
        self.shape = shape
        self.checkpointing = checkpointing
        self.embed_tokens = nn.Embedding(shape.vocab, shape.dim)
        self.layers = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.dim, shape.norm_eps)
        self.lm_head = nn.Linear(shape.dim, shape.vocab, bias=False)
        self.register_buffer("inv_freq", rope_frequencies(shape), persistent=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        residual_std = self.shape.init_std / math.sqrt(2 * self.shape.layers)
        for name, parameter in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                parameter.fill_(1.0)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                parameter.normal_(0.0, residual_std)
            else:
                parameter.normal_(0.0, self.shape.init_std)
        self.inv_freq.copy_(rope_frequencies(self.shape))

    def rotary(self, length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(length, device=device, dtype=torch.float32)
        angles = torch.outer(positions, self.inv_freq.to(device))
        both = torch.cat((angles, angles), dim=-1)
        return both.cos()[None, None], both.sin()[None, None]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(tokens)
        cos, sin = self.rotary(tokens.shape[1], tokens.device)
        for block in self.layers:
            if self.checkpointing and self.training:
                x = checkpoint(block, x, cos, sin, use_reentrant=False)
            else:
                x = block(x, cos, sin)
        return self.lm_head(self.norm(x))


def loss_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross entropy (natural log: its value is the log perplexity), in fp32."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
