"""Reference models. `build(model_cfg, vocab, length)` is the one entry point the trainer uses."""

from hwsweep.models.transformer import SequenceTransformer


def build(model_cfg, vocab_size: int, length: int):
    if model_cfg.name != "transformer":
        raise ValueError(f"recipe.model.name: unknown model {model_cfg.name!r}; use 'transformer'")
    return SequenceTransformer(
        vocab_size=vocab_size,
        length=length,
        width=model_cfg.width,
        depth=model_cfg.depth,
        heads=model_cfg.heads,
        mlp_ratio=model_cfg.mlp_ratio,
    )
